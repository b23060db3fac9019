"""The engine evaluates yaql in a worker thread: a slow expression leaves the process serving.

A real control plane (`anneal serve`, SQLite) at DEBUG with its access log steps a stack
whose resources each run a yaql expression until its time bound (yaqlfn.TIME_LIMIT). The
expressions read a resource's attribute, so the create's dry run (a placeholder there)
passes quickly and the engine does the slow evaluation. Order is read from the process's
own log, never from clocks: /v1/health's access line falls between an evaluation's start
and its end.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.controlplane import start_control_plane, stop_control_plane
from tests.support.waiting import wait_log

SLOW = "let(x => range($.data.n).toList()) -> $x.join($x, true, [$1, $2]).len()"
NAMES = ("slow1", "slow2")
TEMPLATE = json.dumps(
    {
        "heat_template_version": "2018-08-31",
        "resources": {
            "seed": {"type": "OS::Heat::Value", "properties": {"value": 150}},
            **{
                name: {
                    "type": "OS::Heat::Value",
                    "properties": {
                        "value": {
                            "yaql": {"expression": SLOW, "data": {"n": {"get_attr": ["seed", "value"]}}}
                        }
                    },
                }
                for name in NAMES
            },
        },
    }
)


def test_health_answers_while_the_engine_evaluates_a_slow_yaql_expression(tmp_path: Path) -> None:
    """/v1/health is answered between a yaql evaluation's start and end; each expression fails on its time bound."""
    cp = start_control_plane(tmp_path, "--log-level", "DEBUG", "--access-log", defaults=())
    try:
        created = cp.create("slow-yaql", TEMPLATE)
        assert 201 == created.status, created.body
        wait_log(cp.log, "resources.slow1.properties: evaluating yaql off the event loop", timeout=60)
        assert 200 == cp.api("GET", "/v1/health", token=None).status
        stack = cp.wait_stack("slow-yaql")
        resources = {r["name"]: r for r in cp.api("GET", "/v1/stacks/slow-yaql/resources").body}
    finally:
        stop_control_plane(cp)
    assert "CREATE_FAILED" == stack["status"]
    for name in NAMES:
        assert "took longer than" in resources[name]["status_reason"], resources[name]
    lines = cp.log.read_text(errors="replace").splitlines()
    windows = {
        name: (
            _index(lines, f"resources.{name}.properties: evaluating yaql off the event loop"),
            _index(lines, f"resources.{name}.properties: yaql evaluated"),
        )
        for name in NAMES
    }
    first = min(start for start, _ in windows.values())  # the start's own health polls came before
    health = _index(lines, '"GET /v1/health HTTP/1.1" 200', after=first)
    assert any(start < health < end for start, end in windows.values()), (health, windows)


def _index(lines: list[str], text: str, after: int = -1) -> int:
    return next(i for i, line in enumerate(lines) if i > after and text in line)
