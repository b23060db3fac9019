"""Heat's stack timeout over every action that runs deployments: the operator's default
(`--stack-timeout`) for a stack without timeout_mins, and a suspend or delete (a nested stack's
too) whose configs hang past it fails "Timed out"; stack show gives the running action's deadline.

Real `anneal serve` (with Heat's API) and real local agents running the scripts. One minute lasts
4 s here (`--timeout-minute 4`) and the default is 2 minutes (`--stack-timeout 2`): 8 s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import heat_request, start_heat_plane
from tests.support.stack_timeouts import MINUTE, SLOW, deployment, stack_events, stopped_hook
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

#: Quick at create; hangs when the stack is suspended or deleted.
HANGS_ON_THE_WAY_OUT = (
    '#!/bin/sh\ncase "$deploy_action" in SUSPEND|DELETE) echo stuck; sleep 300;; esac\necho quick\n'
)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with Heat's API, 4-second minutes and a 2-minute default stack timeout."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("actions"), *MINUTE, "--stack-timeout", "2")
    yield cp, url
    stop_control_plane(cp)


def in_progress(cp: ControlPlane, name: str) -> dict[str, Any]:
    """The stack as shown while its action runs."""
    return dict(
        wait_until(
            lambda: (s := cp.api("GET", f"/v1/stacks/{name}").body)["status"].endswith("IN_PROGRESS") and s,
            f"stack {name} in progress",
            30,
            0.1,
        )
    )


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def force_delete(cp: ControlPlane, name: str) -> None:
    """Remove a stack whose delete failed, skipping its DELETE configs."""
    assert 202 == cp.api("DELETE", f"/v1/stacks/{name}?force=true").status
    cp.settled(name, "DELETED", timeout=60)


def test_a_stack_without_timeout_mins_times_out_at_the_operators_default(
    plane: tuple[ControlPlane, str],
) -> None:
    """No timeout_mins and `--stack-timeout 2`: the sleeping create fails "Timed out" after 2 minutes;
    Heat's API shows timeout_mins null, as Heat shows a stack that set none."""
    cp, heat_url = plane
    body = {"stack_name": "dflt", "template": one_script_deployment(SLOW, timeout=600)}
    status, created = heat_request(cp, heat_url, "POST", "/stacks", body)
    assert 201 == status, created
    stack = cp.settled("dflt", "CREATE_FAILED", timeout=90)
    assert ("Timed out", None) == (stack["status_reason"], stack["timeout_mins"])
    status, shown = heat_request(cp, heat_url, "GET", f"/stacks/dflt/{created['stack']['id']}")
    assert (200, "CREATE_FAILED", None) == (
        status,
        shown["stack"]["stack_status"],
        shown["stack"]["timeout_mins"],
    )
    assert "deadline" not in shown["stack"]  # Heat's view has no such field
    assert deployment(cp, "dflt")["status_reason"].startswith(
        "Timed out: stack dflt ran past its timeout of 2 min"
    )
    assert 143 == stopped_hook(cp, "dflt")


def test_a_suspend_then_a_delete_whose_configs_hang_each_fail_timed_out(
    plane: tuple[ControlPlane, str],
) -> None:
    """timeout_mins 3 over the default: SUSPEND_FAILED then DELETE_FAILED "Timed out", each stopping its
    hook; stack show (API and CLI) gives the running action's deadline, null once it settled."""
    cp, _ = plane
    text = one_script_deployment(HANGS_ON_THE_WAY_OUT, actions="CREATE, SUSPEND, DELETE", timeout=600)
    assert 201 == cp.api("POST", "/v1/stacks", {"name": "hang", "template": text, "timeout_mins": 3}).status
    assert cp.settled("hang", "CREATE_COMPLETE", timeout=90)["deadline"] is None
    for action, verb in (
        ("SUSPEND", ("POST", "/v1/stacks/hang/suspend")),
        ("DELETE", ("DELETE", "/v1/stacks/hang")),
    ):
        assert 202 == cp.api(*verb).status
        running = in_progress(cp, "hang")
        assert (f"{action}_IN_PROGRESS", iso(running["updated_at"] + 12)) == (
            running["status"],
            running["deadline"],
        )
        shown = cp.cli("stack", "show", "hang", "-f", "json")
        assert running["deadline"] == json.loads(shown.stdout)["deadline"], shown.stderr
        stack = cp.settled("hang", f"{action}_FAILED", timeout=90)
        assert ("Timed out", None) == (stack["status_reason"], stack["deadline"])
        assert ("hang", action, "FAILED", "Timed out") in stack_events(cp, "hang")
        reason = deployment(cp, "hang")["status_reason"]
        assert reason.startswith("Timed out: stack hang ran past its timeout of 3 min"), reason
        assert 143 == stopped_hook(cp, "hang")
    force_delete(cp, "hang")


def test_a_nested_stacks_delete_is_bounded_by_the_stack_timeout(plane: tuple[ControlPlane, str]) -> None:
    """A template resource whose DELETE config hangs: the parent's delete fails "Timed out", and so does
    its nested stack's, whose hook is stopped."""
    cp, _ = plane
    inner = one_script_deployment(HANGS_ON_THE_WAY_OUT, actions="CREATE, DELETE", timeout=600)
    outer = "heat_template_version: 2018-08-31\nresources:\n  inner: {type: inner.yaml}\n"
    body = {"name": "nest", "template": outer, "files": {"inner.yaml": inner}, "timeout_mins": 2}
    assert 201 == cp.api("POST", "/v1/stacks", body).status
    parent = cp.settled("nest", "CREATE_COMPLETE", timeout=90)
    assert 202 == cp.api("DELETE", "/v1/stacks/nest").status
    stack = cp.settled("nest", "DELETE_FAILED", timeout=90)
    # The parent's deadline comes first; under load the nested stack's own may fail it first.
    assert stack["status_reason"].endswith("Timed out"), stack
    nested = [s for s in cp.api("GET", "/v1/stacks?nested=true").body if s["parent"] == parent["id"]]
    assert [("DELETE_FAILED", "Timed out", None)] == [
        (s["status"], s["status_reason"], s["deadline"]) for s in nested
    ]
    assert 143 == stopped_hook(cp, nested[0]["name"])
    force_delete(cp, "nest")
