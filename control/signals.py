"""Signals in batches: many deployments' results in one transaction (group commit).

`agents.record_signal` (what `POST /v1/signal/...` calls) hands each decoded
signal to its runtime's batcher and awaits the answer. The batcher applies every
signal waiting at that moment (up to MAX_BATCH) in one transaction: same checks,
same answers as one at a time (404, 403, 409 stale, duplicates absorbed), one
commit and one work request for the stack instead of one per signal. A batch that
raced an engine step (StaleDataError) or found the database busy is applied again
from a fresh read, so a signal is never half-recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm.exc import StaleDataError

from agent import wire
from control import deploy
from control.engine import settle
from control.errors import AuthError, ControlError, ForbiddenError, NotFoundError
from control.runtime import Runtime
from control.store.orm import DeploymentRow
from control.txn import Txn

log = logging.getLogger(__name__)
MAX_BATCH = 1000
RETRIES = 8


@dataclass
class Pending:
    deployment_id: str
    generation: int
    signal: wire.Signal
    sig: str | None
    server_id: str | None
    future: asyncio.Future[dict[str, Any]] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Batcher:
    def __init__(self, rt: Runtime, kick: Callable[[str], None]) -> None:
        self._rt, self._kick = rt, kick
        self._pending: list[Pending] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, p: Pending) -> dict[str, Any]:
        self._pending.append(p)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="signal-batcher")
        return await p.future

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for p in self._pending:
            if not p.future.done():
                p.future.set_exception(ControlError("the control plane is stopping; signal again"))
        self._pending = []

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                try:
                    await self._apply(batch)
                except Exception as e:
                    log.exception("applying %d signals failed", len(batch))
                    for p in batch:
                        if not p.future.done():
                            p.future.set_exception(e)

    async def _apply(self, batch: list[Pending]) -> None:
        for attempt in range(RETRIES):
            try:
                results = await self._once(batch)
                break
            except (StaleDataError, OperationalError) as e:
                if attempt == RETRIES - 1:
                    raise
                log.info("signal batch raced a concurrent change (%s); applying it again", type(e).__name__)
                await asyncio.sleep(0.01 * (attempt + 1))
        for p, result in zip(batch, results, strict=True):
            if p.future.done():
                continue
            if isinstance(result, BaseException):
                p.future.set_exception(result)
            else:
                p.future.set_result(result)

    async def _once(self, batch: list[Pending]) -> list[dict[str, Any] | BaseException]:
        rt = self._rt
        async with rt.sessions() as session:
            txn = Txn(session, rt)
            ids = sorted({p.deployment_id for p in batch})
            deps = {d.id: d for d in await session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(ids)))}
            out: list[dict[str, Any] | BaseException] = []
            with session.no_autoflush:  # one flush at commit, not one per signal's queries
                for p in batch:
                    try:
                        out.append(await _one(rt, txn, deps.get(p.deployment_id), p))
                    except ControlError as e:
                        out.append(e)
            await txn.commit(self._kick)
            return out


async def _one(rt: Runtime, txn: Txn, dep: DeploymentRow | None, p: Pending) -> dict[str, Any]:
    """One signal's checks and effect inside the batch's transaction (raises before changing anything)."""
    if dep is None:
        raise NotFoundError(f"deployment {p.deployment_id!r} not found", where="deployment")
    if p.sig is not None:
        if not rt.keys.check_signal_signature(p.deployment_id, p.generation, p.sig):
            raise ForbiddenError("signal signature does not match this deployment and generation", where="sig")
    elif p.server_id is None:
        raise AuthError("a signal needs its URL's signature or the agent's credential", where="Authorization")
    elif p.server_id != dep.server_id:
        raise ForbiddenError(f"deployment {p.deployment_id} belongs to another server", where="deployment")
    if not deploy.apply_signal(dep, p.generation, p.signal):
        return {"deployment_id": dep.id, "generation": p.generation, "status": dep.status, "duplicate": True}
    await settle(txn, dep)
    return {"deployment_id": dep.id, "generation": p.generation, "status": dep.status, "duplicate": False}


_BATCHERS: dict[int, tuple[Runtime, Batcher]] = {}


def batcher(rt: Runtime, kick: Callable[[str], None]) -> Batcher:
    """The runtime's batcher (one per control-plane process)."""
    found = _BATCHERS.get(id(rt))
    if found is None or found[0] is not rt:
        found = (rt, Batcher(rt, kick))
        _BATCHERS[id(rt)] = found
    return found[1]


async def close(rt: Runtime) -> None:
    found = _BATCHERS.pop(id(rt), None)
    if found is not None:
        await found[1].close()
