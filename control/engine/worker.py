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
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm.exc import StaleDataError

from control.engine import stackdef
from control.engine.settle import finish
from control.engine.step import step_stack
from control.runtime import Runtime
from control.store import work
from control.store.orm import StackRow
from control.store.workrow import WorkRow
from control.txn import Txn

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

    @property
    def _lease(self) -> float:
        return self._rt.settings.work_lease

    def kick(self, stack_id: str) -> None:
        """A change for *stack_id* was committed (its work row with it): claim without waiting.

        Not for a stack this process is stepping: its step sees the work row's seq moved when it
        finishes and steps again, and a claim now would only take SQLite's write lock between
        two slices of that very step (each slice's commit kicks its stack), which then waits for it.
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

    async def _claim_loop(self) -> None:
        while True:
            self._wake.clear()
            free = MAX_STEPPING - len(self._running)
            if free > 0:
                try:
                    async with self._rt.sessions() as session:
                        claims = await work.claim(session, self.owner, self._lease, free, self._running)
                except DBAPIError as e:
                    log.warning("claiming work failed (retrying): %s", e)
                    self._rt.metrics.database_error("engine", e)
                    claims = []
                if claims:
                    log.info("%s claimed %s", self.owner, " ".join(claim.stack_id for claim in claims))
                for claim in claims:
                    self._running[claim.stack_id] = claim
                    self._tasks[claim.stack_id] = asyncio.create_task(
                        self._run_claim(claim), name=f"stack-{claim.stack_id}"
                    )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._rt.settings.work_poll)

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
                if task is not None:
                    task.cancel()

    async def _run_claim(self, claim: work.Claim) -> None:
        """Step the stack until it settles or waits; keep the lease while more steps are asked for."""
        try:
            while True:
                started = time.monotonic()
                finished, next_at = await self._guarded_step(claim)
                async with self._rt.sessions() as session:
                    seq = await work.finish(session, claim, done=finished, next_at=next_at)
                if seq is None:
                    return
                claim = work.Claim(claim.stack_id, claim.token, seq)
                self._running[claim.stack_id] = claim
                # More was asked for during the step (signals arriving): let them gather for as
                # long as the step took, so a big stack is not re-walked per signal.
                await asyncio.sleep(min(time.monotonic() - started, MAX_GATHER))
        except work.LeaseLostError as e:
            log.info("%s", e)
            self._rt.metrics.lease_losses.inc()
        except DBAPIError as e:  # the lease runs out and the row is claimed again
            log.warning("stack %s: releasing work failed: %s", claim.stack_id, e)
            self._rt.metrics.database_error("engine", e)
        finally:
            self._running.pop(claim.stack_id, None)
            self._tasks.pop(claim.stack_id, None)
            self._wake.set()

    async def _guarded_step(self, claim: work.Claim) -> tuple[bool, float]:
        """One step; (settled, when to step next if not). A race steps again soon, a bug fails the stack."""
        metrics, started = self._rt.metrics, time.monotonic()
        outcome = "interrupted"  # cancelled: its lease was lost at renewal, or the process stops
        try:
            finished, deadline = await self.step(claim)
            outcome = "settled" if finished else "waiting"
        except (StaleDataError, OperationalError) as e:
            log.info("stack %s: step raced a concurrent change (%s); stepping again", claim.stack_id, e)
            outcome = "raced"
            metrics.database_error("engine", e)
            return False, time.time() + RACE_RETRY
        except work.LeaseLostError:
            outcome = "lease_lost"
            raise
        except Exception as e:  # a bug must not leave the stack silently in progress
            log.exception("engine step failed for stack %s", claim.stack_id)
            outcome = "failed"
            await self._fail_stack(claim, f"internal error: {e}")
            return True, 0.0
        finally:
            metrics.engine_step_seconds.labels(outcome).observe(time.monotonic() - started)
        now = time.time()
        return finished, min(deadline if deadline is not None else now + IDLE_RECHECK, now + IDLE_RECHECK)

    async def _fail_stack(self, claim: work.Claim, reason: str) -> None:
        async with self._rt.sessions() as session:
            txn = Txn(session, self._rt)
            stack = await session.get(StackRow, claim.stack_id)
            if stack is not None and stack.status == "IN_PROGRESS":
                finish(txn, stack, "FAILED", reason)
                await work.fence(session, claim, self._lease)
                await txn.commit()
