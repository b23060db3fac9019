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

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from agent import wire
from agent.progress import STATUS, TAIL_BYTES
from control.errors import BadRequestError
from control.signals.scope import check_generation
from control.store.orm import DeploymentRow


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
    return {
        "seq": seq,
        "output_tail": raw.decode("utf-8", "ignore"),
        "output_bytes": size,
        "elapsed": float(elapsed),
    }


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
    """Write *value* unless the deployment moved on meanwhile; the row version is left alone."""
    result = await session.execute(
        update(DeploymentRow)
        .where(
            DeploymentRow.id == dep.id,
            DeploymentRow.generation == generation,
            DeploymentRow.status == "IN_PROGRESS",
        )
        .values(progress=value)
        .execution_options(synchronize_session=False)
    )
    await session.commit()
    return bool(getattr(result, "rowcount", 0))
