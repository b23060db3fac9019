"""Heat's stack timeout: a create or update still running after timeout_mins fails "Timed out", and rolls back if asked.

Real `anneal serve` (with Heat's API) and real local agents running the scripts. One minute of
timeout_mins lasts 4 s here (`--timeout-minute 4`), so a 2-minute timeout is 8 s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.openstack import heat_request, start_heat_plane
from tests.support.stack_timeouts import MINUTE, SLOW, deployment, stack_events, stopped_hook
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

QUICK = "#!/bin/sh\necho quick\n"


def hook_running(cp: ControlPlane, name: str) -> bool:
    """True once the deployment's progress shows the hook's first output; fails at once, saying
    why, when the stack settled first (its deadline passed before the hook got going)."""
    stack = cp.api("GET", f"/v1/stacks/{name}").body
    if not stack["status"].endswith("_IN_PROGRESS"):
        raise AssertionError(
            f"stack {name} is {stack['status']} before its hook reported output: {stack['status_reason']}"
        )
    return "started" in str((deployment(cp, name).get("progress") or {}).get("output_tail"))


def template(script: str) -> str:
    """One server and one script deployment whose own timeout (600 s) is far past the stack's."""
    return one_script_deployment(script, timeout=600)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with Heat's API whose timeout minutes last 4 s; the Heat API's root URL."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("timeouts"), *MINUTE)
    yield cp, url
    stop_control_plane(cp)


def test_a_create_past_timeout_mins_fails_timed_out_through_heats_api(
    plane: tuple[ControlPlane, str],
) -> None:
    """POST /stacks with timeout_mins 2: the sleeping script is stopped and the stack is CREATE_FAILED "Timed out"."""
    cp, heat_url = plane
    body = {"stack_name": "late", "template": template(SLOW), "timeout_mins": 2}
    status, created = heat_request(cp, heat_url, "POST", "/stacks", body)
    assert 201 == status, created
    stack = cp.settled("late", "CREATE_FAILED", timeout=90)
    assert "Timed out" == stack["status_reason"]
    status, shown = heat_request(cp, heat_url, "GET", f"/stacks/late/{created['stack']['id']}")
    assert ("CREATE_FAILED", "Timed out") == (
        shown["stack"]["stack_status"],
        shown["stack"]["stack_status_reason"],
    )
    assert 2 == shown["stack"]["timeout_mins"]
    dep = deployment(cp, "late")
    assert "FAILED" == dep["status"]
    assert dep["status_reason"].startswith("Timed out: stack late ran past its timeout of 2 min"), dep
    assert ("late", "CREATE", "FAILED", "Timed out") in stack_events(cp, "late")
    assert 143 == stopped_hook(cp, "late")


def test_a_nested_stacks_timeout_fails_its_parent_resource(plane: tuple[ControlPlane, str]) -> None:
    """OS::Heat::Stack with timeout 2 in a stack of timeout_mins 5: its nested stack fails "Timed out"
    first, so its resource and the parent fail; a template resource's nested stack inherits the 5."""
    cp, heat_url = plane
    parent = {
        "heat_template_version": "2018-08-31",
        "resources": {
            "inner": {
                "type": "OS::Heat::Stack",
                "properties": {"template": template(SLOW), "timeout": 2},
            },
            "plain": {"type": "plain.yaml"},
        },
    }
    plain = {
        "heat_template_version": "2018-08-31",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": 1}}},
    }
    body = {
        "stack_name": "outer",
        "template": parent,
        "files": {"plain.yaml": json.dumps(plain)},
        "timeout_mins": 5,
    }
    status, created = heat_request(cp, heat_url, "POST", "/stacks", body)
    assert 201 == status, created
    stack = cp.settled("outer", "CREATE_FAILED", timeout=90)
    assert stack["status_reason"].startswith("Resource CREATE failed: inner: nested stack outer-inner-"), (
        stack
    )
    assert stack["status_reason"].endswith(": Timed out"), stack
    nested = {
        s["parent_resource"]: s
        for s in cp.api("GET", "/v1/stacks?nested=true").body
        if s["parent"] == stack["id"]
    }
    assert ("CREATE_FAILED", "Timed out", 2) == tuple(
        nested["inner"][k] for k in ("status", "status_reason", "timeout_mins")
    )
    assert ("CREATE_COMPLETE", 5) == (nested["plain"]["status"], nested["plain"]["timeout_mins"])
    failed = [e for e in stack_events(cp, "outer") if e[0] == "inner" and e[2] == "FAILED"]
    assert failed and failed[-1][3].endswith(": Timed out"), failed
    assert 143 == stopped_hook(cp, nested["inner"]["name"])


def test_an_update_past_timeout_mins_rolls_back_when_asked(plane: tuple[ControlPlane, str]) -> None:
    """An update with rollback whose script sleeps past timeout_mins fails "Timed out", then rolls back to the quick one."""
    cp, _ = plane
    cp.create_stack("back", template(QUICK))
    # 3 minutes (12 s here): the rollback gets as long, room for a signal slowed by a loaded CI machine (8 s seen).
    body = {"template": template(SLOW), "timeout_mins": 3, "rollback": True}
    assert 202 == cp.api("PUT", "/v1/stacks/back", body).status
    stack = cp.settled("back", "ROLLBACK_COMPLETE", timeout=120)
    events = stack_events(cp, "back")
    assert ("back", "UPDATE", "FAILED", "Timed out") in events
    assert ("back", "ROLLBACK", "IN_PROGRESS", "Stack ROLLBACK started: Timed out") in events
    assert events.index(("back", "UPDATE", "FAILED", "Timed out")) < events.index(
        ("back", "ROLLBACK", "IN_PROGRESS", "Stack ROLLBACK started: Timed out")
    )
    dep = deployment(cp, "back")
    assert ("COMPLETE", "quick\n") == (dep["status"], dep["deploy_stdout"]), dep
    assert stack["timeout_mins"] == 3


def test_the_deadline_outlives_a_crash_of_the_control_plane(tmp_path: Path) -> None:
    """kill -9 while the hook sleeps: the restarted control plane still fails the create at its deadline."""
    cp = start_control_plane(tmp_path, *MINUTE)
    try:
        # 4 minutes (16 s here): the local agent must start and report its hook's first output
        # before the deadline, and the control plane must crash and come back before it too; a
        # loaded CI machine took over 8 s for the first part alone.
        body = {"name": "kept", "template": template(SLOW), "timeout_mins": 4}
        assert 201 == cp.api("POST", "/v1/stacks", body).status
        try:
            wait_until(lambda: hook_running(cp, "kept"), "the hook's first output", 60, 0.2)
        except AssertionError as e:
            agent_log = cp.agent_dir("kept-box") / "agent.log"
            tail = agent_log.read_text(errors="replace").splitlines()[-30:] if agent_log.exists() else []
            raise AssertionError(
                "{}\n{}\nthe agent's log:\n{}".format(e, cp.stuck_report("kept"), "\n".join(tail))
            ) from None
        cp.crash()
        cp = start_control_plane(tmp_path, *MINUTE, port=cp.port)
        stack = cp.settled("kept", "CREATE_FAILED", timeout=90)
        assert "Timed out" == stack["status_reason"]
        assert 143 == stopped_hook(cp, "kept")
    finally:
        stop_control_plane(cp)
