"""A stack-wide retry default (the environment's deployment_defaults) and the pending retry said in the status reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.controlplane import ControlPlane
from tests.support.waiting import wait_until

#: Counts its runs in DIR/NAME.runs; fails with status 3 until run FIX_AT.
FLAKY = """#!/bin/sh
echo run >> {dir}/{name}.runs
n=$(wc -l < {dir}/{name}.runs)
if [ "$n" -lt {fix_at} ]; then echo "not ready ($n)" >&2; exit 3; fi
echo ready
"""

DEFAULTS = "deployment_defaults:\n  retry: {retries: 2, backoff: {initial: 4, factor: 1}}\n"


def stack(work: Path, deployments: dict[str, dict[str, Any]]) -> str:
    """One server; a flaky script deployment per entry (``fix_at``, and its own ``retry`` if given)."""
    resources: dict[str, Any] = {"srv": {"type": "OS::Heat::DeployedServer"}}
    for name, spec in deployments.items():
        script = FLAKY.format(dir=work, name=name, fix_at=spec["fix_at"])
        resources[f"{name}_cfg"] = {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "config": script},
        }
        props = {"config": {"get_resource": f"{name}_cfg"}, "server": {"get_resource": "srv"}}
        if "retry" in spec:
            props["retry"] = spec["retry"]
        resources[name] = {"type": "OS::Heat::SoftwareDeployment", "properties": props}
    return json.dumps({"heat_template_version": "2018-08-31", "resources": resources})


def the_deployment(cp: ControlPlane, stack_name: str) -> dict[str, Any]:
    (listed,) = cp.api("GET", f"/v1/deployments?stack={stack_name}").body
    return dict(cp.api("GET", f"/v1/deployments/{listed['id']}").body)


def test_the_stack_default_retries_a_flaky_deployment_and_says_a_retry_is_pending(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """No retry of its own: the environment's default runs it again; meanwhile the stack is IN_PROGRESS and says why."""
    cp = control_plane
    resp = cp.create("dflt", stack(tmp_path, {"flaky": {"fix_at": 2}}), environments=[DEFAULTS])
    assert 201 == resp.status, resp.body

    def pending() -> tuple[dict[str, Any], str] | None:
        found = [
            d
            for d in cp.api("GET", "/v1/deployments?stack=dflt").body
            if d["status_reason"].startswith("retry")
        ]
        return (found[0], cp.api("GET", "/v1/stacks/dflt").body["status"]) if found else None

    dep, stack_status = wait_until(pending, "no retry was said to be pending", 60, interval=0.1)
    assert dep["status_reason"] == "retry 1 of 2 in 4 s after exit 3"
    assert dep["status"] == "IN_PROGRESS" and stack_status == "CREATE_IN_PROGRESS"
    assert "CREATE_COMPLETE" == cp.wait_stack("dflt")["status"]
    shown = the_deployment(cp, "dflt")
    assert [a["status_code"] for a in shown["attempts"]] == [3, 0]
    events = cp.api("GET", "/v1/stacks/dflt/events").body
    said = [e for e in events if e["reason"] == "retry 1 of 2 in 4 s after exit 3"]
    assert [(e["resource_name"], e["status"]) for e in said] == [("flaky", "IN_PROGRESS")]


def test_a_deployment_s_own_retry_wins_over_the_stack_default(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """retries 0 on the deployment itself: one attempt, it fails, although the environment's default would retry."""
    cp = control_plane
    template = stack(tmp_path, {"once": {"fix_at": 2, "retry": {"retries": 0}}})
    resp = cp.create("own", template, environments=[DEFAULTS])
    assert 201 == resp.status, resp.body
    assert "CREATE_FAILED" == cp.wait_stack("own")["status"]
    assert (tmp_path / "once.runs").read_text().splitlines() == ["run"]


def test_a_bad_stack_default_is_refused_naming_its_path(control_plane: ControlPlane, tmp_path: Path) -> None:
    """A default out of range is a 400 naming environments[0].deployment_defaults.retry.retries; no stack is made."""
    cp = control_plane
    bad = "deployment_defaults:\n  retry: {retries: 99}\n"
    resp = cp.create("bad", stack(tmp_path, {"x": {"fix_at": 1}}), environments=[bad])
    assert 400 == resp.status, resp.body
    assert "environments[0].deployment_defaults.retry.retries" in json.dumps(resp.body)
    assert "99 is not an integer in 0..20" in json.dumps(resp.body)
    assert 404 == cp.api("GET", "/v1/stacks/bad").status
