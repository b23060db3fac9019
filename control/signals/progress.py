"""Progress signals: an agent's IN_PROGRESS reports of a running deployment.

A progress signal travels the path of the final signal (same URL, credential and
transport) and is told apart by ``anneal.status == "IN_PROGRESS"``. It never changes the
deployment's state: the last one is kept in ``DeploymentRow.progress`` for
``deployment show`` and ``deployment log --follow``. The rules of final signals apply: an
older or unknown generation is refused as stale; one that arrives after the result (or
repeats, or is older than, the one kept) is answered as a duplicate and dropped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from agent import wire
from agent.progress import STATUS, TAIL_BYTES
from control.errors import BadRequestError
from control.signals.scope import check_generation
from control.store.orm import DeploymentRow, StackRow
from control.txn import Txn


def is_progress(body: Any) -> bool:
    """True when *body* is a progress signal rather than a result."""
    extra = body.get(wire.EXTRA_KEY) if isinstance(body, Mapping) else None
    return isinstance(extra, Mapping) and extra.get("status") == STATUS


def decode(body: Mapping[str, Any]) -> dict[str, Any]:
    """The progress fields, checked; BadRequestError names the one that is wrong."""
    extra = body[wire.EXTRA_KEY]
    seq, tail, size, elapsed = (extra.get(k) for k in ("seq", "output_tail", "output_bytes", "elapsed"))
    where = f"{wire.EXTRA_KEY}."
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise BadRequestError("seq: expected a positive integer", where=where + "seq")
    if not isinstance(tail, str):
        raise BadRequestError("output_tail: expected a string", where=where + "output_tail")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise BadRequestError("output_bytes: expected a non-negative integer", where=where + "output_bytes")
    if isinstance(elapsed, bool) or not isinstance(elapsed, int | float):
        raise BadRequestError("elapsed: expected a number of seconds", where=where + "elapsed")
    # The agent sends TAIL_BYTES; anything longer keeps its tail, as the agent would.
    raw = tail.encode("utf-8", "replace")[-TAIL_BYTES:]
    found: dict[str, Any] = {
        "seq": seq,
        "output_tail": raw.decode("utf-8", "ignore"),
        "output_bytes": size,
        "elapsed": float(elapsed),
    }
    if extra.get("retry") is not None:
        found["retry"] = _retry(extra["retry"], where + "retry")
    return found


def _retry(value: Any, where: str) -> dict[str, Any]:
    """A retry note (agent/attempts.py): ``{retry, of}`` running, plus ``in`` and ``after`` pending."""
    if not isinstance(value, Mapping):
        raise BadRequestError("retry: expected an object", where=where)
    counts = [value.get("retry"), value.get("of")]
    if any(isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= 1000 for n in counts):
        raise BadRequestError("retry and of: expected integers 1..1000", where=where)
    found: dict[str, Any] = {"retry": counts[0], "of": counts[1]}
    wait, after = value.get("in"), value.get("after")
    if wait is not None or after is not None:
        if isinstance(wait, bool) or not isinstance(wait, int | float) or wait < 0:
            raise BadRequestError("in: expected a number of seconds", where=where + ".in")
        if not isinstance(after, str) or not 0 < len(after) <= 64:
            raise BadRequestError("after: expected a short text (exit N, timeout)", where=where + ".after")
        found.update({"in": float(wait), "after": after})
    return found


def retry_reason(progress: Mapping[str, Any]) -> str | None:
    """The status reason a retry note gives ("retry 2 of 3 in 4 s after exit 1"); None without one."""
    note = progress.get("retry")
    if not isinstance(note, Mapping):
        return None
    if "in" in note:
        return f"retry {note['retry']} of {note['of']} in {note['in']:g} s after {note['after']}"
    return f"retry {note['retry']} of {note['of']} running"


def apply_progress(dep: DeploymentRow, generation: int, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The progress to keep for *dep* from *body*; None when it is late or a repeat.

    *dep* is not changed: the caller stores the value with a plain UPDATE, so a progress
    report never bumps the row version that the engine's and the API's writes check.
    """
    progress = decode(body)
    claimed = body[wire.EXTRA_KEY].get("generation")
    if claimed is not None and claimed != generation:
        raise BadRequestError(
            f"the body reports on generation {claimed!r} but was sent to generation {generation}",
            where="anneal.generation",
        )
    check_generation(dep, generation)
    if dep.status != "IN_PROGRESS":
        return None
    last = dep.progress or {}
    if last.get("generation") == generation and int(last.get("seq", 0)) >= progress["seq"]:
        return None
    return {**progress, "generation": generation, "at": time.time()}


async def store_progress(
    session: AsyncSession, dep: DeploymentRow, generation: int, value: dict[str, Any]
) -> bool:
    """Write *value* unless the deployment moved on meanwhile; the row version is left alone.

    A retry note also sets the deployment's status reason: the stack stays IN_PROGRESS and
    says why ("retry 2 of 3 in 4 s after exit 1").
    """
    reason = retry_reason(value)
    changes: dict[str, Any] = {"progress": value} | ({"status_reason": reason} if reason else {})
    result = await session.execute(
        update(DeploymentRow)
        .where(
            DeploymentRow.id == dep.id,
            DeploymentRow.generation == generation,
            DeploymentRow.status == "IN_PROGRESS",
        )
        .values(**changes)
        .execution_options(synchronize_session=False)
    )
    await session.commit()
    return bool(getattr(result, "rowcount", 0))


async def note_retry(
    txn: Txn, dep: DeploymentRow, generation: int, value: Mapping[str, Any], before: Any
) -> None:
    """An event when a retry becomes pending (once per retry), so `stack ... --wait` shows it as it happens."""
    note, reason = value.get("retry"), retry_reason(value)
    if reason is None or not isinstance(note, Mapping) or "in" not in note or note == before:
        return
    traversal = await txn.session.scalar(select(StackRow.traversal).where(StackRow.id == dep.stack_id))
    txn.event(
        dep.stack_id or "",
        dep.resource_name,
        dep.action,
        "IN_PROGRESS",
        reason,
        traversal=traversal or 0,
        deployment_id=dep.id,
        generation=generation,
    )
    await txn.commit()
