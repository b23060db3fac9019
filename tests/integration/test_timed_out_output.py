"""A deployment that times out keeps what its hook printed: the agent's late result is stored with FAILED."""

from __future__ import annotations

import json
from typing import Any

from tests.support.controlplane import ControlPlane
from tests.support.waiting import wait_until

SLOW = "#!/bin/sh\necho 'step one done'\necho 'warming the cache' >&2\nsleep 300\necho 'never printed'\n"


def slow_stack(timeout: int) -> str:
    """One server, one script deployment that prints, then sleeps far past its *timeout*."""
    resources: dict[str, Any] = {
        "srv": {"type": "OS::Heat::DeployedServer"},
        "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": SLOW}},
        "dep": {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {
                "config": {"get_resource": "cfg"},
                "server": {"get_resource": "srv"},
                "timeout": timeout,
            },
        },
    }
    return json.dumps({"heat_template_version": "2018-08-31", "resources": resources})


def test_a_timed_out_deployment_keeps_the_output_the_agent_sends_late(control_plane: ControlPlane) -> None:
    """Timed out after 3 s: the hook is ended and its output tail lands on the FAILED row, with its code."""
    cp = control_plane
    cp.create_stack("slow", slow_stack(3), expect="CREATE_FAILED")
    (listed,) = cp.api("GET", "/v1/deployments?stack=slow").body

    def late() -> dict[str, Any] | None:
        dep = cp.api("GET", f"/v1/deployments/{listed['id']}").body
        return dep if dep["deploy_status_code"] is not None else None

    dep = wait_until(late, "the agent's late result", 60, 0.2)
    # Whichever ends the hook first: its own deadline in the hook (124) or the stop order (143).
    code = dep["deploy_status_code"]
    assert "FAILED" == dep["status"] and code in (124, 143), dep
    assert dep["status_reason"].startswith("timed out after 3 s")
    assert dep["status_reason"].endswith(f"; the agent's late result: status code {code}")
    assert "step one done\n" == dep["deploy_stdout"]
    assert "warming the cache" in dep["deploy_stderr"], dep["deploy_stderr"]
    failures = cp.api("GET", "/v1/stacks/slow/failures").body
    assert "step one done" in json.dumps(failures)


def test_a_cancelled_deployment_keeps_what_the_stopped_hook_printed(control_plane: ControlPlane) -> None:
    """`stack cancel` stops the hook (143); the signal carries its output tail, kept with FAILED."""
    cp = control_plane
    assert 201 == cp.create("held", slow_stack(600)).status
    listed = wait_until(lambda: cp.api("GET", "/v1/deployments?stack=held").body, "the deployment", 30, 0.2)[
        0
    ]

    def show() -> dict[str, Any]:
        return dict(cp.api("GET", f"/v1/deployments/{listed['id']}").body)

    wait_until(
        lambda: "warming the cache" in str((show().get("progress") or {}).get("output_tail")),
        "the hook's first output",
        60,
        0.2,
    )
    assert 0 == cp.cli("stack", "cancel", "held").returncode

    def late() -> dict[str, Any] | None:
        dep = show()
        return dep if dep["deploy_status_code"] is not None else None

    dep = wait_until(late, "the late result", 60, 0.2)
    assert ("FAILED", 143) == (dep["status"], dep["deploy_status_code"])
    assert dep["status_reason"].startswith("cancelled by `anneal stack cancel`")
    assert dep["status_reason"].endswith("; the agent's late result: status code 143")
    assert "step one done\n" == dep["deploy_stdout"]
    assert dep["deploy_stderr"].endswith(
        "warming the cache\nstopped: the control plane cancelled this generation (cancel or timeout)"
    )
