"""A result signal applied to its deployment: the status and outputs it records (Heat's rules)."""

from __future__ import annotations

import time
from typing import Any

from agent import wire, wire_caps
from control.signals.scope import check_generation
from control.store.orm import DeploymentRow

#: What deploy_status_code may be: the database keeps it in a 32-bit integer (PostgreSQL's int4).
STATUS_CODES = range(-(2**31), 2**31)


def bad_status_code(signal: wire.Signal) -> str | None:
    """Why the signal's deploy_status_code cannot be kept, or None when it can."""
    code = signal.status_code
    if code in STATUS_CODES:
        return None
    digits = len(str(abs(code)))
    shown = str(code) if digits <= 20 else f"a {digits}-digit number"
    return f"deploy_status_code: {shown} is out of range ({STATUS_CODES.start} to {STATUS_CODES.stop - 1})"


def result_status(dep: DeploymentRow, signal: wire.Signal) -> tuple[str, str, dict[str, Any]]:
    """COMPLETE or FAILED with its reason, and the declared outputs kept (Heat's rules).

    A deploy_status_code out of range fails the deployment (it is not 0) with that reason,
    its outputs dropped; the signal itself is answered 400 (control/signals/batch.py).
    """
    bad = bad_status_code(signal)
    if bad is not None:
        return "FAILED", f"the signal was refused: {bad}", {}
    declared = {o["name"]: o for o in (dep.item or {}).get("outputs", [])}
    outputs = {k: v for k, v in signal.outputs.items() if k in declared}
    if signal.status_code != 0:
        return "FAILED", f"Deployment exited with non-zero status code: {signal.status_code}", outputs
    for name, spec in declared.items():
        if spec.get("error_output") and outputs.get(name):
            return "FAILED", f"{name} : {outputs[name]}", outputs
    return "COMPLETE", "Outputs received", outputs


def apply_signal(dep: DeploymentRow, generation: int, signal: wire.Signal) -> bool:
    """Record *signal* for *generation*; False when it duplicates one already recorded."""
    check_generation(dep, generation)
    if dep.status != "IN_PROGRESS" or signal.extra.get("status") == "IN_PROGRESS":
        return False  # a progress report read as a result (by any path) never completes a deployment
    status, reason, outputs = result_status(dep, signal)
    now = time.time()
    dep.status, dep.status_reason = status, reason
    dep.outputs = outputs
    dep.stdout = wire_caps.trim_stream(signal.stdout)
    dep.stderr = wire_caps.trim_stream(signal.stderr)
    dep.status_code = signal.status_code if bad_status_code(signal) is None else None
    dep.signal_nonce = str(signal.extra.get("nonce") or "") or None
    dep.completed_at = dep.updated_at = now
    return True
