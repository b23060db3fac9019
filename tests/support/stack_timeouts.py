"""What the stack-timeout tests share: one minute of timeout_mins lasting 4 s, a script that sleeps
past it, and reads of a stack's events and of its one deployment through the API."""

from __future__ import annotations

from typing import Any

from tests.support.controlplane import ControlPlane
from tests.support.waiting import wait_until

#: One minute of timeout_mins lasts 4 s: long enough for a local agent to start its hook under load.
MINUTE = ("--timeout-minute", "4")
SLOW = "#!/bin/sh\necho started\nsleep 300\n"


def stack_events(cp: ControlPlane, name: str) -> list[tuple[str, str, str, str]]:
    """(resource, action, status, reason) of each event of the stack, oldest first (the stack's: its name)."""
    return [
        (e["resource_name"], e["action"], e["status"], e["reason"])
        for e in cp.api("GET", f"/v1/stacks/{name}/events").body
    ]


def deployment(cp: ControlPlane, stack: str) -> dict[str, Any]:
    """The stack's one deployment as shown (empty until the stack made it)."""
    listed = cp.api("GET", f"/v1/deployments?stack={stack}").body
    return dict(cp.api("GET", f"/v1/deployments/{listed[0]['id']}").body) if listed else {}


def stopped_hook(cp: ControlPlane, stack: str) -> int:
    """The status code of the stopped hook's late result, for the deployment's generation as it is
    now (the agent was told to stop it: SIGTERM's 143)."""
    generation = deployment(cp, stack)["generation"]

    def code() -> Any:
        dep = deployment(cp, stack)
        return dep["deploy_status_code"] if dep["generation"] == generation else None

    return int(wait_until(code, f"the stopped hook's result (generation {generation})", 60, 0.3))
