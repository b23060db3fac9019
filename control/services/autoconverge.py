"""``converge_interval``: a stack's servers are checked and what drifted is converged, without the operator.

The environment's ``deployment_defaults: {converge_interval: S}`` sets it (hot/environment.py);
a create or update schedules the first round S seconds on (services/converge_interval.py). A round is durable,
in the stack row: ``converge_due`` (when the loop next looks at the stack) and
``converge_asked`` (when this round's checks were asked). Every process runs ``loop``: it
claims due stacks with a conditional UPDATE (one process wins each), asks for the checks
(services/drift.py), waits up to ``ANSWER_WAIT`` for the answers, converges what is missing,
failed or drifted (services/converge.py), and schedules the next round. A stack in progress
is looked at again shortly; a restart resumes from the row. Heat's CHECK action
(``drift.start_check``) uses the same columns: the loop ends it once the answers are in. Work is bounded: at most
``BATCH`` stacks a tick, one short transaction each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm.exc import StaleDataError

from control.errors import ControlError
from control.principal import EVERYWHERE
from control.runtime import Runtime
from control.services import converge, drift
from control.services.converge_interval import interval
from control.store.orm import StackRow

log = logging.getLogger(__name__)
#: Seconds between two looks for due stacks, the most stacks looked at in one, and how long a
#: claimed round holds the stack before another process may take it over.
TICK, BATCH, CLAIM = 1.0, 20, 120.0
#: Seconds a round waits for the servers' answers; then it converges what it knows.
ANSWER_WAIT = 60.0
#: Seconds until a look again: while answers come in, and while the stack is busy.
POLL, BUSY = 1.0, 5.0
REAPPLIED = ("missing", "failed", "drifted")


async def loop(rt: Runtime, kick: Callable[[str], None]) -> None:
    while True:
        await asyncio.sleep(TICK)
        try:
            await once(rt, kick)
        except (DBAPIError, StaleDataError) as e:  # busy or raced: the row says where the round was
            log.warning("converge_interval round failed (retrying): %s", e)


async def once(rt: Runtime, kick: Callable[[str], None]) -> int:
    """Look at every due stack (at most BATCH); the number looked at."""
    now = time.time()
    async with rt.sessions() as session:
        due = list(
            await session.scalars(
                select(StackRow.id)
                .where(StackRow.converge_due <= now)
                .order_by(StackRow.converge_due)
                .limit(BATCH)
            )
        )
    for stack_id in due:
        if (stack := await _claim(rt, stack_id, now)) is not None:
            try:
                await _round(rt, kick, stack, now)
            except ControlError as e:  # the stack changed meanwhile (deleted, busy): look again later
                log.info("stack %s: converge_interval round put off: %s", stack.name, e)
                await _set(rt, stack_id, due=now + BUSY)
    return len(due)


async def _claim(rt: Runtime, stack_id: str, now: float) -> StackRow | None:
    """The stack, if this process won its due round (others see it due CLAIM seconds later)."""
    async with rt.sessions() as session:
        won = await session.execute(
            update(StackRow)
            .where(StackRow.id == stack_id, StackRow.converge_due <= now)
            .values(converge_due=now + CLAIM)
            .execution_options(synchronize_session=False)
        )
        await session.commit()
        if won.rowcount != 1:  # type: ignore[attr-defined]
            return None
        return await session.get(StackRow, stack_id)


async def _round(rt: Runtime, kick: Callable[[str], None], stack: StackRow, now: float) -> None:
    every = interval(stack)
    if (stack.action, stack.status) == ("CHECK", "IN_PROGRESS"):
        await _finish_check(rt, stack, now, every)
    elif every is None or stack.action == "DELETE":
        await _set(rt, stack.id, due=None, asked=None)
    elif stack.status == "IN_PROGRESS":
        await _set(rt, stack.id, due=now + BUSY)
    elif stack.converge_asked is None:
        await drift.request(rt, stack.id, within=EVERYWHERE)
        await _set(rt, stack.id, due=now + POLL, asked=now)
    else:
        report = await converge.check(rt, stack.id, within=EVERYWHERE)
        if report["pending"] and now - stack.converge_asked < ANSWER_WAIT:
            await _set(rt, stack.id, due=now + POLL)
            return
        if any(d["kind"] in REAPPLIED for d in report["drift"]):
            view = await converge.converge(rt, kick, stack.id, within=EVERYWHERE)
            log.info("stack %s: converge_interval re-applies %s", stack.name, view["reapplied"])
        await _set(rt, stack.id, due=now + every, asked=None)


async def _finish_check(rt: Runtime, stack: StackRow, now: float, every: float | None) -> None:
    """Heat's CHECK action (drift.start_check) ends once the servers answered or the wait ran out."""
    report = await converge.check(rt, stack.id, within=EVERYWHERE)
    if report["pending"] and now - (stack.converge_asked or 0) < ANSWER_WAIT:
        await _set(rt, stack.id, due=now + POLL)
        return
    await converge.check_stack(rt, stack.id, within=EVERYWHERE, started=True)
    await _set(rt, stack.id, due=None if every is None else now + every, asked=None)


async def _set(rt: Runtime, stack_id: str, **values: Any) -> None:
    """Write the round's columns (``due``, ``asked``) alone: nothing else of the stack changes."""
    cols = {f"converge_{k}": v for k, v in values.items()}
    async with rt.sessions() as session:
        await session.execute(
            update(StackRow)
            .where(StackRow.id == stack_id)
            .values(**cols)
            .execution_options(synchronize_session=False)
        )
        await session.commit()
