"""The real control plane signs, refreshes and rotates; real local agents follow (R13, R15)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import agents
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

TTL = 6.0

TEMPLATE = one_script_deployment(
    """
    #!/bin/sh
    printf '%s' "$STEP" > "$heat_outputs_path.step"
    """,
    version="2018-08-31",
    params={"step": "string"},
    inputs={"STEP": "{get_param: step}"},
    outputs=["step"],
    server_name="keys-box",
)


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("keys"), "--document-ttl", str(TTL))
    plane.create_stack("keys", TEMPLATE, params={"step": "one"})
    yield plane
    stop_control_plane(plane)


def agent_status(cp: ControlPlane) -> dict[str, Any]:
    return agents.agent_status(cp.agent_dir("keys-box"))


def update(cp: ControlPlane, step: str) -> None:
    body = {"template": TEMPLATE, "parameters": {"step": step}}
    assert 202 == cp.api("PUT", "/v1/stacks/keys", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("keys")["status"]
    assert step == cp.outputs("keys")["step"]


def test_documents_are_re_signed_before_they_expire(cp: ControlPlane) -> None:
    """With nothing changing, the serial still moves before expiry and the agent never freezes."""
    first = cp.api("GET", "/v1/servers/keys-box").body["serial"]
    seen: list[int] = []

    def moved_thrice() -> bool:
        status = agent_status(cp)
        assert status["frozen"] is False, status
        if status["serial"] > first and status["serial"] not in seen:
            seen.append(status["serial"])
        return len(seen) == 3

    wait_until(moved_thrice, f"serial did not move past {first} three times", 10 * TTL, interval=0.5)
    assert not agent_status(cp)["rejections"]["counts"]
    update(cp, "after-refresh")


def test_key_rotation_reaches_running_agents_through_the_chain(cp: ControlPlane) -> None:
    """`anneal key rotate`: agents adopt the new key via the chain and keep deploying."""
    before = json.loads(cp.cli("key", "show", "-f", "json").stdout)
    rotated = cp.cli("key", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    after = json.loads(cp.cli("key", "show", "-f", "json").stdout)
    assert after["key_id"] != before["key_id"]
    assert after["chain"][-1]["previous"] == before["key_id"]
    update(cp, "after-rotation")
    wait_until(
        lambda: agent_status(cp)["trusted_key_id"] == after["key_id"], "the agent to trust the new key"
    )
    assert not agent_status(cp)["rejections"]["counts"]


def test_an_agents_rejection_report_shows_in_server_show(cp: ControlPlane) -> None:
    """What an agent reports refusing is visible to the operator in `anneal server show`."""
    token = cp.api("POST", "/v1/servers", {"name": "reporter"}).body["enrol_token"]
    keys = {
        "sign": base64.b64encode(os.urandom(32)).decode(),
        "box": base64.b64encode(os.urandom(32)).decode(),
    }
    enrolled = cp.api("POST", "/v1/agent/enrol", {"token": token, "public_keys": keys}, token=None)
    assert enrolled.status == 201 and enrolled.body["control_public_key"]
    refused = {"kind": "rollback", "reason": "serial 3 < 9"}
    report = {"counts": {"rollback": 2}, "last": [{"at": 1.0, **refused}]}
    resp = cp.api("POST", "/v1/agent/heartbeat", {"rejections": report}, token=enrolled.body["credential"])
    assert resp.status == 200
    shown = json.loads(cp.cli("server", "show", "reporter", "-f", "json").stdout)
    # The CLI shows every time in ISO 8601 (epoch seconds in the API).
    assert shown["agent_status"]["rejections"] == {
        **report,
        "last": [{"at": "1970-01-01T00:00:01.000Z", **refused}],
    }
