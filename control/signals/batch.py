"""Signals that arrive together are applied in one database transaction.

Each result signal (``POST /v1/signal/...``, a transport's collected signal)
waits in a queue; one task per process takes everything queued, applies it in a
single transaction (one query for the deployments, one for their resources, one
executemany UPDATE for each table's results, one commit, one work-row upsert per
stack) and only then answers each caller. An
agent is therefore never told a signal was taken before it is committed: if the
process dies between receiving and committing, the agent gets no answer, keeps
the signal in its outbox and sends it again, and the generation+nonce rules
(control/signals/scope.py) apply it once.

A signal the rules refuse (stale, wrong owner, another answer) gets its error
alone; the rest of the batch is applied. If the batch's transaction fails as a
whole (a concurrent change, the database), each signal of it is applied again
in its own transaction, so one bad signal cannot fail the others.

Nothing waits to gather a batch: while one batch is being applied the next one
queues up, so a quiet control plane answers a single signal as fast as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from agent import wire
from control.documents import seal
from control.engine.settle import settle
from control.errors import BadRequestError, ControlError, GoneError, NotFoundError
from control.metrics import group_of
from control.runtime import Runtime
from control.signals import scope
from control.signals.result import APPLIED, DUPLICATE, apply_signal, bad_status_code
from control.store import bulk
from control.store.orm import DeploymentRow, ResourceRow, ServerRow
from control.txn import Txn

log = logging.getLogger(__name__)
#: Signals applied in one transaction at most (bounds a transaction's size and IN lists).
MAX_BATCH = 500


@dataclass
class _Pending:
    deployment_id: str
    generation: int
    signal: wire.Signal
    sig: str | None
    server_id: str | None
    #: The hash of the agent credential that named server_id (None for a URL signature or a store).
    credential: str | None
    kick: Callable[[str], None]
    answer: asyncio.Future[dict[str, Any]] = field(repr=False)
    #: When the signal reached this process (the publish-to-signal latency ends here).
    arrived: float = field(default_factory=time.time)


class SignalBatch:
    """The queue of result signals of one control-plane process (one per Runtime)."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._queue: list[_Pending] = []
        self._task: asyncio.Task[None] | None = None
        #: Transactions committed and signals applied (for the bench and the tests).
        self.batches = 0
        self.applied = 0

    async def apply(
        self,
        kick: Callable[[str], None],
        deployment_id: str,
        generation: int,
        signal: wire.Signal,
        *,
        sig: str | None,
        server_id: str | None,
        credential: str | None = None,
    ) -> dict[str, Any]:
        """Apply one result signal; returns once the transaction holding it has committed."""
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pending = _Pending(deployment_id, generation, signal, sig, server_id, credential, kick, answer)
        self._queue.append(pending)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="signal-batch")
        return await answer

    async def close(self) -> None:
        """Stop applying (the app is shutting down): cancel the drain and whatever still waits.

        A cancelled signal gets no answer, so its agent keeps it and sends it again
        (as after a crash); the drain's open transaction is rolled back.
        """
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        queued, self._queue = self._queue, []
        for p in queued:
            p.answer.cancel()

    async def _drain(self) -> None:
        while self._queue:
            # One turn of the event loop first: the callers just answered (and, over HTTP,
            # requests already read) queue their next signals, so they join this batch
            # instead of trailing the previous one in a batch of their own.
            await asyncio.sleep(0)
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            batch = [p for p in batch if not p.answer.done()]  # callers gone (cancelled) are skipped
            if not batch:
                continue
            try:
                await self._apply(batch)
            except Exception as e:  # one transaction per signal, so only the failing ones fail
                if len(batch) == 1:
                    if not batch[0].answer.done():
                        batch[0].answer.set_exception(e)
                    continue
                log.info("a batch of %d signals failed (%s); applying each alone", len(batch), e)
                for p in batch:
                    try:
                        await self._apply([p])
                    except Exception as single:  # handed to that signal's caller
                        if not p.answer.done():
                            p.answer.set_exception(single)

    async def _apply(self, batch: list[_Pending]) -> None:
        """Apply *batch* in one transaction; answer the callers only after it committed."""
        answers: list[tuple[_Pending, dict[str, Any] | ControlError]] = []
        finished: list[tuple[_Pending, DeploymentRow]] = []
        async with self._rt.sessions() as session:
            # The results in one UPDATE per table at the flush, not one per row (control/store/bulk.py).
            bulk.on_flush(session.sync_session, (DeploymentRow, ResourceRow))
            txn = Txn(session, self._rt)
            deps, resources = await _load(session, sorted({p.deployment_id for p in batch}))
            held = await _credentials(session, batch)
            stacks = {d.stack_id for d in deps.values() if d.stack_id}
            texts, traversals = await seal.stack_texts_and_traversals(session, stacks)
            for p in batch:
                dep = deps.get(p.deployment_id)
                try:
                    _check(p, dep)
                    if p.credential is not None:
                        scope.check_held(held.get(p.server_id or ""), p.credential)
                    assert dep is not None  # _check raised otherwise
                    scope.check_answer(dep, p.generation, p.signal)
                    # apply_signal refuses (raises) before it changes anything
                    secrets = seal.texts_for(dep.item, texts.get(dep.stack_id or "", ()))
                    outcome = apply_signal(dep, p.generation, p.signal, secrets)
                except ControlError as e:
                    answers.append((p, e))
                    continue
                if outcome == APPLIED:  # an error from here on fails the whole batch (retried one by one)
                    await settle(txn, dep, resources, traversals)
                    finished.append((p, dep))
                bad = bad_status_code(p.signal)  # recorded as the failure, and refused for good
                view = _view(dep, p.generation, duplicate=outcome == DUPLICATE)
                answers.append((p, BadRequestError(bad, where="deploy_status_code") if bad else view))
            await txn.commit()
        self._observe(finished)
        kicks = {p.kick for p in batch}
        for stack_id in txn.kicks:
            for kick in kicks:
                kick(stack_id)
        self.batches += 1
        for p, answer in answers:
            if p.answer.done():
                continue
            if isinstance(answer, ControlError):
                p.answer.set_exception(answer)
            else:
                self.applied += not answer["duplicate"]
                p.answer.set_result(answer)

    def _observe(self, finished: list[tuple[_Pending, DeploymentRow]]) -> None:
        """Time the generations whose results just committed (after the commit: a retried batch counts once)."""
        metrics = self._rt.metrics
        for p, dep in finished:
            group = group_of(dep.item)
            metrics.deployment_finished(dep.status, group, dep.started_at, dep.completed_at or p.arrived)
            if dep.started_at is not None:
                metrics.publish_to_signal.labels(group).observe(max(p.arrived - dep.started_at, 0.0))


#: Encrypted deployment columns a result replaces or never reads (``_load``).
_NOT_READ = (
    DeploymentRow.input_values,
    DeploymentRow.outputs,
    DeploymentRow.stdout,
    DeploymentRow.stderr,
    DeploymentRow.attempts,
    DeploymentRow.check_result,
)
#: ``_load``'s loader options, built once (built per batch they were two thirds of its queries'
#: construction: 0.48 against 0.15 ms).
_DEPLOYMENT_UNREAD = tuple(defer(column, raiseload=True) for column in _NOT_READ)
_RESOURCE_UNREAD = (
    defer(ResourceRow.properties, raiseload=True),
    defer(ResourceRow.attributes, raiseload=True),
)


async def _load(
    session: AsyncSession, ids: list[str]
) -> tuple[dict[str, DeploymentRow], dict[str, ResourceRow | None]]:
    """The deployments and their resource rows, in two queries (their stacks' traversals come
    with their secret texts: ``seal.stack_texts_and_traversals``).

    Columns a result never reads are not loaded (each would be decrypted and
    decoded for nothing): a deployment's input values, outputs, hook output, attempts
    and check, a resource's properties and attributes (the result replaces them).
    Reading one raises, it does not query.
    """
    query = select(DeploymentRow).where(DeploymentRow.id.in_(ids)).options(*_DEPLOYMENT_UNREAD)
    deps = {d.id: d for d in await session.scalars(query)}
    resources: dict[str, ResourceRow | None] = dict.fromkeys(ids)
    rquery = select(ResourceRow).where(ResourceRow.physical_id.in_(ids)).options(*_RESOURCE_UNREAD)
    for row in await session.scalars(rquery):
        dep = deps.get(row.physical_id or "")
        if dep is None or row.stack_id != dep.stack_id:
            continue
        if resources[dep.id] is None or row.status == "IN_PROGRESS":
            resources[dep.id] = row  # the one a result settles
    return deps, resources


async def _credentials(session: AsyncSession, batch: list[_Pending]) -> dict[str, str | None]:
    """The credential hash each signalling server holds now, in one query (none for URL signatures)."""
    ids = sorted({p.server_id for p in batch if p.credential is not None and p.server_id})
    if not ids:
        return {}
    found = await session.execute(
        select(ServerRow.id, ServerRow.credential_hash).where(ServerRow.id.in_(ids))
    )
    return {r[0]: r[1] for r in found}


def _check(p: _Pending, dep: DeploymentRow | None) -> None:
    if dep is None and p.sig is not None:
        raise GoneError(f"deployment {p.deployment_id} no longer exists", where="deployment")
    if dep is None:
        raise NotFoundError(f"deployment {p.deployment_id!r} not found", where="deployment")
    scope.check_owner(dep, p.sig, p.server_id)


def _view(dep: DeploymentRow, generation: int, *, duplicate: bool) -> dict[str, Any]:
    return {"deployment_id": dep.id, "generation": generation, "status": dep.status, "duplicate": duplicate}


def batch_for(rt: Runtime) -> SignalBatch:
    """The runtime's signal queue (made on first use, on the running event loop)."""
    if not isinstance(rt.signal_batch, SignalBatch):  # None until the first signal
        rt.signal_batch = SignalBatch(rt)
    return rt.signal_batch
