"""A result signal applied to its deployment: the status and outputs it records (Heat's rules)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from agent import wire, wire_caps
from control.engine.timeouts import TIMED_OUT
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
    if signal.extra.get("refused"):  # the server's allowlist refused it: its reason says more than a code
        return "FAILED", taint.mask_text(str(signal.extra["refused"]), secrets), outputs
    if signal.status_code != 0:
        return "FAILED", f"Deployment exited with non-zero status code: {signal.status_code}", outputs
    for name, spec in declared.items():
        value = taint.reveal(outputs.get(name))
        if spec.get("error_output") and value:
            shown = taint.MASK if spec.get("secret") else taint.mask_text(str(value), secrets)
            return "FAILED", f"{name} : {shown}", outputs
    return "COMPLETE", "Outputs received", outputs


#: How the reasons begin of a generation the control plane gave up on before its result came
#: (engine/settle.py `timed_out_reason`, group_members.expire, services/stacks.py cancel_stack,
#: and the stack's own timeout: engine/timeouts.py).
GAVE_UP = ("timed out after ", "cancelled by ", f"{TIMED_OUT}: ")
APPLIED, LATE, DUPLICATE = "applied", "late", "duplicate"
#: Attempts kept per generation (agent/attempts.py allows at most 21: hot/retry.py's MAX_RETRIES + 1).
MAX_ATTEMPTS = 21


def apply_signal(
    dep: DeploymentRow, generation: int, signal: wire.Signal, secrets: frozenset[str] = frozenset()
) -> str:
    """Record *signal* for *generation*: APPLIED; LATE (kept on a generation already failed as
    timed out or cancelled, which stays FAILED); DUPLICATE (nothing changed).

    *secrets* are the deployment's secret texts (``seal.texts_for``): what the hook wrote
    back that holds one is kept as a Secret, and no reason quotes one.
    """
    check_generation(dep, generation)
    if signal.extra.get("status") == "IN_PROGRESS":
        return DUPLICATE  # a progress report read as a result (by any path) never completes a deployment
    if dep.status != "IN_PROGRESS":
        return LATE if _keep_late(dep, signal, secrets) else DUPLICATE
    status, reason, outputs = result_status(dep, signal, secrets)
    attempts = attempts_of(signal)
    if status == "FAILED" and attempts and len(attempts) > 1:
        reason = exhausted(attempts, secrets)
    dep.attempts = _kept_attempts(attempts, secrets)
    dep.status, dep.status_reason = status, reason
    dep.outputs = outputs
    _record(dep, signal, secrets)
    dep.completed_at = dep.updated_at
    return APPLIED


def _keep_late(dep: DeploymentRow, signal: wire.Signal, secrets: frozenset[str]) -> bool:
    """Keep the output of a result that came after its generation timed out (or was cancelled).

    The operator then sees why it was slow; the status stays FAILED and nothing re-settles.
    Only the first result counts (``signal_nonce`` is set from then on).
    """
    if (
        dep.status != "FAILED"
        or dep.status_code is not None
        or dep.signal_nonce is not None
        or not (dep.status_reason or "").startswith(GAVE_UP)
    ):
        return False
    dep.status_reason += f"; the agent's late result: status code {signal.status_code}"
    _record(dep, signal, secrets)
    return True


def _record(dep: DeploymentRow, signal: wire.Signal, secrets: frozenset[str]) -> None:
    dep.stdout = _kept(wire_caps.trim_stream(signal.stdout), {}, secrets)
    dep.stderr = _kept(wire_caps.trim_stream(signal.stderr), {}, secrets)
    dep.status_code = signal.status_code if bad_status_code(signal) is None else None
    dep.signal_nonce = str(signal.extra.get("nonce") or "") or None
    dep.updated_at = time.time()


def attempts_of(signal: wire.Signal) -> list[dict[str, Any]] | None:
    """The attempts a result reports (agent/attempts.py), checked and capped; None for one attempt."""
    raw = signal.extra.get("attempts")
    if not isinstance(raw, list):
        return None
    keep = ("attempt", "status_code", "started_at", "ended_at", "timed_out", "stdout", "stderr")
    out = []
    for entry in raw[-MAX_ATTEMPTS:]:
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("attempt"), int)
            and isinstance(entry.get("status_code"), int)
        ):
            out.append({k: entry.get(k) for k in keep})
    return out or None


def _kept_attempts(attempts: list[dict[str, Any]] | None, secrets: frozenset[str]) -> Any:
    """*attempts* with each stdout and stderr that holds a secret text kept as a Secret (as stdout is)."""
    if not attempts:
        return None
    return [{**a, **{k: _kept(a.get(k), {}, secrets) for k in ("stdout", "stderr")}} for a in attempts]


def exhausted(attempts: list[dict[str, Any]], secrets: frozenset[str] = frozenset()) -> str:
    """A failure after retries: every attempt's code and the last line of its stderr, secrets masked."""
    parts = []
    for entry in attempts:
        # masked whole before the last line is cut from it: a cut secret no longer matches
        text = taint.mask_text(str(entry.get("stderr") or ""), secrets)
        lines = [line for line in text.splitlines() if line.strip()]
        why = f"status code {entry['status_code']}" + (" (timed out)" if entry.get("timed_out") else "")
        parts.append(f"attempt {entry['attempt']}: {why}" + (f": {lines[-1][-160:]}" if lines else ""))
    return f"failed after {len(attempts)} attempts; " + "; ".join(parts)


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
