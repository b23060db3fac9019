"""A result signal applied to its deployment: the status and outputs it records (Heat's rules)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from agent import wire, wire_caps
from control.hot import taint
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


def result_status(
    dep: DeploymentRow, signal: wire.Signal, secrets: frozenset[str] = frozenset()
) -> tuple[str, str, dict[str, Any]]:
    """COMPLETE or FAILED with its reason, and the declared outputs kept (Heat's rules).

    An output declared ``secret: true``, or holding one of *secrets* (the deployment's
    secret texts, ``seal.texts_for``), is kept as a Secret; a reason never quotes a secret.
    A deploy_status_code out of range fails the deployment (it is not 0) with that reason,
    its outputs dropped; the signal itself is answered 400 (control/signals/batch.py).
    """
    bad = bad_status_code(signal)
    if bad is not None:
        return "FAILED", f"the signal was refused: {bad}", {}
    declared = {o["name"]: o for o in (dep.item or {}).get("outputs", [])}
    outputs = {k: _kept(v, declared[k], secrets) for k, v in signal.outputs.items() if k in declared}
    if signal.status_code != 0:
        return "FAILED", f"Deployment exited with non-zero status code: {signal.status_code}", outputs
    for name, spec in declared.items():
        value = taint.reveal(outputs.get(name))
        if spec.get("error_output") and value:
            shown = taint.MASK if spec.get("secret") else taint.mask_text(str(value), secrets)
            return "FAILED", f"{name} : {shown}", outputs
    return "COMPLETE", "Outputs received", outputs


def apply_signal(
    dep: DeploymentRow, generation: int, signal: wire.Signal, secrets: frozenset[str] = frozenset()
) -> bool:
    """Record *signal* for *generation*; False when it duplicates one already recorded."""
    check_generation(dep, generation)
    if dep.status != "IN_PROGRESS" or signal.extra.get("status") == "IN_PROGRESS":
        return False  # a progress report read as a result (by any path) never completes a deployment
    status, reason, outputs = result_status(dep, signal, secrets)
    now = time.time()
    dep.status, dep.status_reason = status, reason
    dep.outputs = outputs
    dep.stdout = _kept(wire_caps.trim_stream(signal.stdout), {}, secrets)
    dep.stderr = _kept(wire_caps.trim_stream(signal.stderr), {}, secrets)
    dep.status_code = signal.status_code if bad_status_code(signal) is None else None
    dep.signal_nonce = str(signal.extra.get("nonce") or "") or None
    dep.completed_at = dep.updated_at = now
    return True


def _kept(value: Any, spec: Mapping[str, Any], secrets: frozenset[str]) -> Any:
    """*value* as a Secret when declared secret or when it holds a secret text."""
    if spec.get("secret") or mentions(value, secrets):
        return taint.Secret(value)
    return value


def mentions(value: Any, secrets: frozenset[str]) -> bool:
    """Whether *value* (text, or any JSON) contains one of *secrets*."""
    if not secrets or value is None:
        return False
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return any(s in text for s in secrets)
