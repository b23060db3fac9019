"""Signals to wait condition handles: checked, stored on the handle, the stack woken.

Heat's bodies (heat.md; Heat's wait_condition_handle.py): an OS handle takes
``{status, reason, data, id}``, each optional (SUCCESS, "Signal N received", null, N);
an AWS handle takes exactly ``{Status, Reason, UniqueId, Data}``. A signal with an id
already received replaces it. Anything else is a 400 naming the key.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select

from control.errors import AuthError, BadRequestError, ConflictError, ForbiddenError, GoneError
from control.resources.waits import AWS_HANDLE, HANDLE_TYPES, SIGNALS
from control.runtime import Runtime
from control.store.orm import ResourceRow
from control.txn import Txn, retried_on_race

STATUSES = ("SUCCESS", "FAILURE")
#: Signals one handle keeps at most (a loop in a script must not grow the row without bound).
MAX_SIGNALS = 1000


def check_handle_credential(rt: Runtime, handle_id: str, token: str | None, sig: str | None) -> None:
    """The handle's token (X-Auth-Token) or the URL's ``sig``: both are HMACs over its id."""
    given = token or sig
    if not given:
        raise AuthError("a wait condition signal needs X-Auth-Token or the URL's sig", where="X-Auth-Token")
    if not rt.keys.check_capability("wait-handle", handle_id, given):
        raise ForbiddenError("the token does not open this wait condition handle", where="X-Auth-Token")


def parse_signal(body: Any, aws: bool, received: int) -> tuple[str, dict[str, Any]]:
    """``(id, {status, reason, data})`` of one signal, with Heat's defaults for an OS handle."""
    if body is None or body == "":
        body = {}
    if not isinstance(body, Mapping):
        raise BadRequestError("expected a JSON object", where="body")
    keys = ("Status", "Reason", "UniqueId", "Data") if aws else ("status", "reason", "id", "data")
    unknown = sorted(set(body) - set(keys))
    if unknown:
        raise BadRequestError(f"unknown key {unknown[0]!r}; a signal has {', '.join(keys)}", where=unknown[0])
    status_key, reason_key, id_key, data_key = keys
    if aws and set(body) != set(keys):
        missing = sorted(set(keys) - set(body))[0]
        raise BadRequestError(f"{missing} is required", where=missing)
    status = body.get(status_key, "SUCCESS")
    if status not in STATUSES:
        raise BadRequestError(f"{status!r} is not SUCCESS or FAILURE", where=status_key)
    number = received + 1
    reason = body.get(reason_key, f"Signal {number} received")
    return str(body.get(id_key, number)), {"status": status, "reason": reason, "data": body.get(data_key)}


@retried_on_race
async def record_wait_signal(
    rt: Runtime, kick: Callable[[str], None], handle_id: str, body: Any
) -> dict[str, Any]:
    """Store one signal on its handle and wake the stack; retried when a step wrote the row meanwhile."""
    async with rt.sessions() as session:
        row = await session.scalar(
            select(ResourceRow).where(
                ResourceRow.physical_id == handle_id, ResourceRow.type.in_(HANDLE_TYPES)
            )
        )
        if row is None:
            raise GoneError(f"wait condition handle {handle_id} no longer exists", where="handle")
        signals = dict(row.attributes.get(SIGNALS) or {})
        key, signal = parse_signal(body, row.type == AWS_HANDLE, len(signals))
        if key not in signals and len(signals) >= MAX_SIGNALS:
            raise ConflictError(f"the handle already holds {MAX_SIGNALS} signals", where="handle")
        signals[key] = signal
        row.attributes = {**row.attributes, SIGNALS: signals}
        row.updated_at = time.time()
        txn = Txn(session, rt)
        txn.event(
            row.stack_id,
            row.name,
            "SIGNAL",
            "COMPLETE",
            f"signal {key}: {signal['status']} ({signal['reason']})",
            traversal=row.traversal,
        )
        txn.kicks.add(row.stack_id)
        await txn.commit(kick)
        return {"handle": handle_id, "id": key, "status": signal["status"], "received": len(signals)}
