"""The engine's scheduling: which stacks this process steps, and for how long it may.

State lives in durable work rows (control/store/work.py); the step itself is
control/engine/step.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from control.engine import batch, stackdef
from control.engine.settle import finish
from control.engine.step import step_stack
from control.runtime import Runtime
from control.store import work
from control.store.db import raced
from control.store.orm import StackRow
from control.store.workrow import WorkRow
from control.txn import Txn, retried_on_race

log = logging.getLogger(__name__)
#: A stack waiting only for signals is stepped again after this long anyway (seconds).
IDLE_RECHECK = 30.0
#: A step that raced a concurrent change is retried after this long (seconds).
RACE_RETRY = 0.05
#: The longest a stack's next step waits for more changes to gather (seconds).
MAX_GATHER = 2.0
#: Stacks one process steps at the same time.
MAX_STEPPING = 16


class Engine:
    """Steps stacks whose durable work rows (control/store/work.py) this process has leased.

    A claim loop leases due rows (at once when this process committed a change,
    else every ``work_poll`` seconds), a task per leased stack steps it until it
    waits for a signal or a deadline, and a renew loop extends the leases held.
    A step commits only while its lease still holds (``work.fence``), so two
    processes never both commit a step of one stack, and a process killed at any
    instruction leaves either its whole step or nothing; its rows go to another
    process (or to itself, restarted) once their lease expires.
    """

    def __init__(self, runtime: Runtime, definitions: stackdef.Definitions) -> None:
        self._rt = runtime
        self._defs = definitions
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wake = asyncio.Event()
        self._running: dict[str, work.Claim] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._loops: list[asyncio.Task[None]] = []
        self._one_batch = asyncio.Lock()

    @property
    def _lease(self) -> float:
        return self._rt.settings.work_lease

    def kick(self, stack_id: str) -> None:
        """A change for *stack_id* was committed (its work row with it): claim without waiting.

        Not for a stack this process is stepping: its step sees the work row's seq moved when it
        finishes and steps again, and a claim now would only take SQLite's write lock between
        two slices of that very step (a signal for one of its deployments kicks it), which then
        waits for it.
        """
        if stack_id not in self._running:
            self._wake.set()

    async def resume(self) -> None:
        """Start claiming; every stack in progress without a work row gets one (older databases)."""
        async with self._rt.sessions() as session:
            ids = set(await session.scalars(select(StackRow.id).where(StackRow.status == "IN_PROGRESS")))
            ids -= set(await session.scalars(select(WorkRow.stack_id)))
            if ids:
                await work.request(session, ids)
                await session.commit()
        self._loops = [
            asyncio.create_task(self._claim_loop(), name="engine-claim"),
            asyncio.create_task(self._renew_loop(), name="engine-renew"),
        ]

    async def close(self) -> None:
        """Stop claiming and renewing, and cancel the steps under way (their leases run out)."""
        tasks = [*self._loops, *self._tasks.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def step(self, claim: work.Claim) -> tuple[bool, float | None]:
        """One step of the claimed stack: (settled, its nearest deadline)."""
        return await step_stack(self._rt, self._defs, claim, lease=self._lease, kick=self.kick)

    async def step_batch(self, claims: list[work.Claim]) -> batch.Stepped:
        """One step of each claimed sibling stack, in one transaction (control/engine/batch.py)."""
        return await batch.step_batch(self._rt, self._defs, claims, lease=self._lease, kick=self.kick)

    async def _claim_loop(self) -> None:
        while True:
            self._wake.clear()
            free = MAX_STEPPING - len(set(self._tasks.values()))
            if free > 0:
                try:
                    async with self._rt.sessions() as session:
                        claims = await work.claim(session, self.owner, self._lease, free, self._running)
                        batches = await batch.gather(
                            session, claims, self.owner, self._lease, set(self._running)
                        )
                except DBAPIError as e:
                    log.warning("claiming work failed (retrying): %s", e)
                    self._rt.metrics.database_error("engine", e)
                    batches = []
                if batches:
                    log.info("%s claimed %s", self.owner, " ".join(c.stack_id for b in batches for c in b))
                for claimed in batches:
                    task = asyncio.create_task(self._run_claims(claimed), name=f"stack-{claimed[0].stack_id}")
                    for claim in claimed:
                        self._running[claim.stack_id] = claim
                        self._tasks[claim.stack_id] = task
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._rt.settings.work_poll):
                    await self._wake.wait()

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            if not self._running:
                continue
            held = {c.stack_id: c.token for c in self._running.values()}
            try:
                async with self._rt.sessions() as session:
                    lost = await work.renew(session, list(self._running.values()), self._lease)
            except DBAPIError as e:
                log.warning("renewing leases failed (retrying): %s", e)
                self._rt.metrics.database_error("engine", e)
                continue
            # A claim released or claimed again while the renewals ran is not a loss: cancelling
            # "the task of that stack" would then stop its next step, which would wait out a lease.
            lost = {i for i in lost if i in self._running and self._running[i].token == held[i]}
            self._rt.metrics.lease_losses.inc(len(lost))
            for stack_id in lost:
                log.warning("stack %s: lease lost to another process; stopping here", stack_id)
                task = self._tasks.get(stack_id)
                # A batch's other stacks go on: its fence finds the loss, and its stacks are then
                # stepped one by one (the lost one's step ends at its own fence).
                if task is not None and list(self._tasks.values()).count(task) == 1:
                    task.cancel()

    async def _run_claims(self, claims: list[work.Claim]) -> None:
        """Step the stacks until they settle or wait; keep each lease while more steps are asked for."""
        members = [c.stack_id for c in claims]
        try:
            while claims:
                started = time.monotonic()
                results = await self._step_all(claims)
                ends = [(c, *results[c.stack_id]) for c in claims if c.stack_id in results]
                ended = await self._finish(ends)
                for stack_id in ended.lost:
                    log.info("lease on stack %s lost to another process", stack_id)
                self._rt.metrics.lease_losses.inc(len(ended.lost))
                claims = [
                    work.Claim(c.stack_id, c.token, ended.again[c.stack_id])
                    for c, _, _ in ends
                    if c.stack_id in ended.again
                ]
                for claim in claims:
                    self._running[claim.stack_id] = claim
                for stack_id in set(members) - {c.stack_id for c in claims}:
                    self._forget(stack_id)
                # More was asked for during the step (signals arriving): let them gather for as
                # long as the step took, so a big stack is not re-walked per signal.
                if claims:
                    await asyncio.sleep(min(time.monotonic() - started, MAX_GATHER))
        except DBAPIError as e:  # the lease runs out and the row is claimed again
            log.warning("stacks %s: releasing work failed: %s", " ".join(members), e)
            self._rt.metrics.database_error("engine", e)
        finally:
            for stack_id in members:
                self._forget(stack_id)
            self._wake.set()

    @retried_on_race
    async def _finish(self, ends: list[tuple[work.Claim, bool, float]]) -> work.Released:
        """Release the stepped stacks' work; a deadlock with a step asking for more runs it again."""
        async with self._rt.sessions() as session:
            return await work.finish_many(session, ends)

    def _forget(self, stack_id: str) -> None:
        task = self._tasks.get(stack_id)
        if task is asyncio.current_task():
            self._running.pop(stack_id, None)
            self._tasks.pop(stack_id, None)

    async def _step_all(self, claims: list[work.Claim]) -> dict[str, tuple[bool, float]]:
        """A step of each stack: (settled, when to step next if not); a lost lease leaves it out.

        Siblings are stepped in one batch. A batch that raced (a concurrent change, a locked
        database, a PostgreSQL deadlock: ``raced``) is stepped again soon, whole, as one stack's
        step would be; one that failed otherwise (a lost lease, a bug in one member's step) is
        stepped again one by one.
        """
        done: dict[str, tuple[bool, float]] = {}
        alone = claims
        if len(claims) > 1:
            try:
                stepped = await self._locked_batch(claims)
            except Exception as e:  # nothing of the batch committed
                if raced(e):
                    log.info(
                        "batch of %d stacks raced a concurrent change (%s); stepping it again", len(claims), e
                    )
                    self._rt.metrics.database_error("engine", e)
                    return {c.stack_id: (False, time.time() + RACE_RETRY) for c in claims}
                log.info("batch of %d stacks failed (%s); stepping them one by one", len(claims), e)
            else:
                done = {i: (f, _next_at(d)) for i, (f, d) in stepped.results.items()}
                alone = stepped.alone
        for claim in alone:
            try:
                done[claim.stack_id] = await self._guarded_step(claim)
            except work.LeaseLostError as e:
                log.info("%s", e)
                self._rt.metrics.lease_losses.inc()
        return done

    async def _locked_batch(self, claims: list[work.Claim]) -> batch.Stepped:
        # SQLite has one writer: two batches at once only wait on its lock, and one that waits past
        # the busy timeout fails whole. They wait here instead, without a timeout.
        if not self._rt.settings.db_url.startswith("sqlite"):
            return await self.step_batch(claims)
        async with self._one_batch:
            return await self.step_batch(claims)

    async def _guarded_step(self, claim: work.Claim) -> tuple[bool, float]:
        """One step; (settled, when to step next if not). A race steps again soon, a bug fails the stack."""
        metrics, started = self._rt.metrics, time.monotonic()
        outcome = "interrupted"  # cancelled: its lease was lost at renewal, or the process stops
        try:
            finished, deadline = await self.step(claim)
            outcome = "settled" if finished else "waiting"
        except work.LeaseLostError:
            outcome = "lease_lost"
            raise
        except Exception as e:
            if raced(e):
                log.info("stack %s: step raced a concurrent change (%s); stepping again", claim.stack_id, e)
                outcome = "raced"
                metrics.database_error("engine", e)
                return False, time.time() + RACE_RETRY
            # A bug must not leave the stack silently in progress.
            log.exception("engine step failed for stack %s", claim.stack_id)
            outcome = "failed"
            await self._fail_stack(claim, f"internal error: {e}")
            return True, 0.0
        finally:
            metrics.engine_step_seconds.labels(outcome).observe(time.monotonic() - started)
        return finished, _next_at(deadline)

    async def _fail_stack(self, claim: work.Claim, reason: str) -> None:
        async with self._rt.sessions() as session:
            txn = Txn(session, self._rt)
            stack = await session.get(StackRow, claim.stack_id)
            if stack is not None and stack.status == "IN_PROGRESS":
                finish(txn, stack, "FAILED", reason)
                await work.fence(session, claim, self._lease)
                await txn.commit()


def _next_at(deadline: float | None) -> float:
    """When a stack that has not settled is stepped next: its deadline, or a recheck at the latest."""
    now = time.time()
    return min(deadline if deadline is not None else now + IDLE_RECHECK, now + IDLE_RECHECK)
