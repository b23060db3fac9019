"""A result signal applied to its deployment: the status and outputs it records (Heat's rules)."""

from __future__ import annotations

import time
from typing import Any

from agent import wire, wire_caps
from control.signals.scope import check_generation
from control.store.orm import DeploymentRow


def result_status(dep: DeploymentRow, signal: wire.Signal) -> tuple[str, str, dict[str, Any]]:
    """COMPLETE or FAILED with its reason, and the declared outputs kept (Heat's rules)."""
    declared = {o["name"]: o for o in (dep.item or {}).get("outputs", [])}
    outputs = {k: v for k, v in signal.outputs.items() if k in declared}
    if signal.extra.get("refused"):  # the server's allowlist refused it: its reason says more than a code
        return "FAILED", str(signal.extra["refused"]), outputs
    if signal.status_code != 0:
        return "FAILED", f"Deployment exited with non-zero status code: {signal.status_code}", outputs
    for name, spec in declared.items():
        if spec.get("error_output") and outputs.get(name):
            return "FAILED", f"{name} : {outputs[name]}", outputs
    return "COMPLETE", "Outputs received", outputs


#: How the reasons begin of a generation the control plane gave up on before its result came
#: (engine/settle.py `timed_out_reason`, group_members.expire, services/stacks.py cancel_stack).
GAVE_UP = ("timed out after ", "cancelled by ")
APPLIED, LATE, DUPLICATE = "applied", "late", "duplicate"


def apply_signal(dep: DeploymentRow, generation: int, signal: wire.Signal) -> str:
    """Record *signal* for *generation*: APPLIED; LATE (kept on a generation already failed as
    timed out or cancelled, which stays FAILED); DUPLICATE (nothing changed)."""
    check_generation(dep, generation)
    if signal.extra.get("status") == "IN_PROGRESS":
        return DUPLICATE  # a progress report read as a result (by any path) never completes a deployment
    if dep.status != "IN_PROGRESS":
        return LATE if _keep_late(dep, signal) else DUPLICATE
    status, reason, outputs = result_status(dep, signal)
    dep.status, dep.status_reason = status, reason
    dep.outputs = outputs
    _record(dep, signal)
    dep.completed_at = dep.updated_at
    return APPLIED


def _keep_late(dep: DeploymentRow, signal: wire.Signal) -> bool:
    """Keep the output of a result that came after its generation timed out (or was cancelled).

    The operator then sees why it was slow; the status stays FAILED and nothing re-settles.
    Only the first result counts (``signal_nonce`` is set from then on).
    """
    if (
        dep.status != "FAILED"
        or dep.status_code is not None
        or not (dep.status_reason or "").startswith(GAVE_UP)
    ):
        return False
    dep.status_reason += f"; the agent's late result: status code {signal.status_code}"
    _record(dep, signal)
    return True


def _record(dep: DeploymentRow, signal: wire.Signal) -> None:
    dep.stdout = wire_caps.trim_stream(signal.stdout)
    dep.stderr = wire_caps.trim_stream(signal.stderr)
    dep.status_code = signal.status_code
    dep.signal_nonce = str(signal.extra.get("nonce") or "") or None
    dep.updated_at = time.time()
