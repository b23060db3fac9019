"""One step of a stack: the walk in dependency order, the cleanup, the deadlines.

State lives in the database only; a step re-reads it, so a restarted control
plane resumes every stack that was in progress. A step starts every resource
whose dependencies are done in the current traversal, then the stack waits to be
woken (a signal arrived) or for the nearest deployment deadline. Replaced and
removed resources are deleted last, after every current resource is done: the
replacement exists before the old one goes.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

from sqlalchemy import func, select

from control import hot
from control.engine import breakpoints, idle, lifecycle, purge, rollback, stackdef, timeouts
from control.engine.act import Actor, error_reason
from control.engine.light import Light, Row, done
from control.engine.settle import finish, in_session, settle, timed_out_reason
from control.engine.slices import Slices, preload
from control.engine.timeouts import nearest
from control.errors import ControlError
from control.metrics import Metrics, group_of
from control.resources import Outcome, Res, checker_for, handler_for, nested
from control.resources.group_stack import GroupStack
from control.resources.provider import TemplateResource
from control.runtime import Runtime
from control.store import bulk, work
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from control.txn import Txn

#: Handlers whose check only follows their nested stack while it runs (``Step._full_to_check``).
NESTING = (TemplateResource, GroupStack)
#: A step loads the stack row without its definition columns, held for the whole step for a
#: definition this process has cached (stackdef.Definitions) since the stack's first step.
STACK_WITHOUT_DEFINITION = stackdef.without(*stackdef.DEFINITION_COLUMNS)


async def step_stack(
    rt: Runtime,
    defs: stackdef.Definitions,
    claim: work.Claim,
    *,
    lease: float,
    kick: Callable[[str], None],
) -> tuple[bool, float | None]:
    """Step the claimed stack once, committing only while the lease holds: (settled, nearest deadline)."""
    async with rt.sessions() as session:
        waiting, deadline = await idle.only_waiting(session, defs, claim.stack_id)
        if waiting:
            return False, deadline
    async with rt.sessions() as session:
        # Its changed deployments and resources go in one UPDATE per shape at each flush
        # (control/store/bulk.py); a failed write ends the step and the session rolls back.
        bulk.on_flush(session.sync_session, (DeploymentRow, ResourceRow, StackRow))
        txn = Txn(session, rt, committed=[defs.adopt])
        stack = await session.get(StackRow, claim.stack_id, options=STACK_WITHOUT_DEFINITION)
        if stack is None:
            return True, None
        # Load the stack's deployments, configs and servers only when some resource may act. The
        # session's identity map holds rows weakly: this list keeps them loaded until the step ends.
        keep_alive: list[object] = []
        if stack.status != "IN_PROGRESS":
            where = (ResourceRow.stack_id == stack.id, ResourceRow.status == "IN_PROGRESS")
            rows: list[Row] = list(await session.scalars(select(ResourceRow).where(*where)))
            slices = Slices(txn, stack, len(rows), claim=claim, lease=lease, kick=kick)
        else:
            defined = await _defined(txn, stack, defs)
            count = await session.scalar(select(func.count()).where(ResourceRow.stack_id == claim.stack_id))
            slices = Slices(txn, stack, max(count or 0, defined), claim=claim, lease=lease, kick=kick)
            rows = await slices.rows()
            if idle.may_act(stack, rows, defined):
                keep_alive = await preload(txn, [claim.stack_id], rows, slices.sliced)
        ran = await run(txn, stack, defs, slices, rows)
        deadline = ran.deadline
        if ran.purge:
            await purge.purge(txn, defs, [stack])
        await work.fence(session, claim, lease)
        await txn.commit(kick)
        del keep_alive
        # Its long-polls answer first; then the deadlines of what it started (bench/hop_trace.py).
        await slices.answered()
        if ran.started:
            deadline = nearest(deadline, await idle.nearest_deadline(session, claim.stack_id))
    return ran.finished, deadline


async def _defined(txn: Txn, stack: StackRow, defs: stackdef.Definitions) -> int:
    """How many resources the stack's definition has (its definition read once per process)."""
    if stack.action == "DELETE":
        return 0  # a stack being deleted needs none
    defs.release_older(stack.id, stack.version)
    if defs.cached(stack.id, stack.version) is None:
        await txn.session.refresh(stack, attribute_names=list(stackdef.DEFINITION_COLUMNS))
    return len(defs.get(stack).template.resources)


class Ran(NamedTuple):
    """What a step did: settled, its nearest deadline, started a deployment, its stack to purge."""

    finished: bool
    deadline: float | None
    started: bool
    purge: bool


async def run(txn: Txn, stack: StackRow, defs: stackdef.Definitions, slices: Slices, rows: list[Row]) -> Ran:
    """The step proper, inside the caller's transaction, which fences and commits it.

    A settled stack whose resource acts on its own (a scaling group resizing on its policy's
    signal, as in Heat) has that resource followed; the stack's status does not change.
    """
    if stack.status != "IN_PROGRESS":
        acting = [r for r in rows if r.status == "IN_PROGRESS" and checker_for(r.type) is not None]
        deadline = await Step(txn, stack, defs, slices, acting).check()
        return Ran(not any(r.status == "IN_PROGRESS" for r in acting), deadline, False, False)
    if timeouts.passed(stack):  # Heat's stack timeout: what still runs is stopped, the action fails
        finished = await timeouts.time_out(txn, stack)
        return Ran(finished, timeouts.deadline_of(stack), False, False)
    step = Step(txn, stack, defs, slices, rows)
    deadline = nearest(await step.expire(), await step.check())
    finished = await step.advance()
    deadline = nearest(deadline, timeouts.deadline_of(stack))
    return Ran(finished, deadline, step.started and not finished, step.purge)


class Step:
    """What one step of one stack holds: its transaction, stack row, definitions, slices and rows."""

    def __init__(
        self, txn: Txn, stack: StackRow, defs: stackdef.Definitions, slices: Slices, rows: list[Row]
    ) -> None:
        self.txn, self.stack, self.defs, self.slices, self.rows = txn, stack, defs, slices, rows
        #: True once this step started a resource that is now IN_PROGRESS (a deployment running).
        self.started = False
        #: True once the stack's delete is done: its rows are purged before the commit.
        self.purge = False

    async def advance(self) -> bool:
        """Walk, clean up and finish as far as the stack's state allows; True once it settled."""
        stack, rows = self.stack, self.rows
        failed = [r for r in rows if r.status == "FAILED" and r.traversal == stack.traversal]
        if failed:
            if self.slices.light:
                # A group's check failed it in this step, which holds light records: the failure
                # commits now, and the next step (kicked by check) loads full rows, as Slices.rows
                # does whenever a resource failed, for the rollback that rewrites rows stack-wide.
                self.txn.kicks.add(stack.id)
                return False
            first = failed[0]
            assert isinstance(first, ResourceRow), (
                f"resource {first.name}: a light record outside a sliced step"
            )
            asked = rollback.rollback_asked(self.defs.get(stack), failed)
            return await rollback.resource_failed(self.txn, stack, rows, first, asked)
        if stack.action in lifecycle.ACTIONS:
            return await self._lifecycle()
        if stack.action != "DELETE" and await self._walk():
            return False
        if await self._cleanup(await self.slices.old(rows)):
            return False
        if stack.action == "DELETE":
            self.purge = True  # its rows go at the end of the step, with its siblings' (engine/purge.py)
        else:
            if stack.parent_id is not None:
                stack.outputs = await self._outputs()  # its parent resource's attributes
            finish(self.txn, stack, "COMPLETE", f"Stack {stack.action} completed successfully")
        # Settled in this step: a step it asked of itself (a resource done at once) would find
        # nothing to do. A change committed by anyone else still bumps the work row's seq.
        self.txn.kicks.discard(stack.id)
        return True

    async def _outputs(self) -> dict[str, Any]:
        """The stack's outputs now; one that cannot be evaluated is null (`stack outputs` says why)."""
        defn = self.defs.get(self.stack)
        ctx = stackdef.StackContext(self.stack, defn, {r.name: r for r in self.rows if r.current})
        out: dict[str, Any] = {}
        for name, odef in defn.template.outputs.items():
            if not defn.output_active(name):
                continue
            try:
                out[name] = stackdef.plain(await stackdef.resolve(odef.value, ctx, f"outputs.{name}.value"))
            except hot.TemplateError:
                out[name] = None
        return out

    async def _walk(self) -> bool:
        """Start every resource whose dependencies are done; True while any is not done."""
        traversal, slices = self.stack.traversal, self.slices
        defn = self.defs.get(self.stack)
        actor, needs = Actor(self.txn, self.stack, defn), defn.template.dependencies
        current: dict[str, Row] = {r.name: r for r in self.rows if r.current}
        pending = False
        for chunk in slices.of(defn.order()):
            await slices.realize(current, chunk, lambda rows: actor.changing(rows, current), needs)
            for name in chunk:
                row = current.get(name)
                if done(row, traversal):
                    continue
                if row is None or row.status != "IN_PROGRESS":
                    # (One IN_PROGRESS runs on its server, in this traversal or one an update
                    # superseded: it finishes, and its result is compared with this traversal's
                    # wishes then.)
                    pending = await self._start(actor, name, row, current) or pending
                    await slices.tick()  # documents leave as the walk goes, not after it
                    continue
                pending = True
            await slices.commit()
            slices.settle(current, chunk)
        return pending

    async def _start(self, actor: Actor, name: str, row: Row | None, current: dict[str, Row]) -> bool:
        """Act on *name* if what it requires is done; True while it is not done.

        One done at once is not pending: its dependents come later in this walk, and a walk
        that leaves nothing pending settles the stack in this step, not in one more.
        """
        defn, traversal = self.defs.get(self.stack), self.stack.traversal
        if not all(done(current.get(d), traversal) for d in defn.requires(name)):
            return True
        if isinstance(row, Light):
            return True  # its row is gone since the step began: the next step walks what is left
        if await breakpoints.holds(self.txn, self.stack, defn.environment, name, row):
            if row is None:
                current[name] = actor.placeholder(name)  # listed, so `hook clear` finds it
            return True  # paused until its hook is cleared (the clearing signal kicks the stack)
        acted = current[name] = await actor.act(name, row, current)
        self.slices.acted += 1
        if done(acted, traversal):
            return False
        if acted.status == "IN_PROGRESS":
            self.started = True
        else:
            self.txn.kicks.add(self.stack.id)  # failed at once: the next step acts on it
        return True

    async def _lifecycle(self) -> bool:
        """SUSPEND or RESUME (control/engine/lifecycle.py walks the resources)."""
        full = [r for r in self.rows if isinstance(r, ResourceRow)]  # all: such a step holds full rows
        if not await lifecycle.advance(self.txn, self.stack, full, self.defs.get(self.stack)):
            return False
        finish(self.txn, self.stack, "COMPLETE", f"Stack {self.stack.action} completed successfully")
        return True

    async def _cleanup(self, old: list[Row]) -> bool:
        """Delete replaced and removed resources, dependents first; True while any remain."""
        remaining = {r.id for r in old}
        # How many remaining rows (of another name) require each name: O(1) per row, not O(N).
        needed: Counter[str] = Counter(n for o in old for n in set(o.requires or []) if n != o.name)
        started: set[int] = set()  # whose DELETE this step started (their light records still say otherwise)
        while True:
            before = len(remaining)
            for chunk in self.slices.of([r for r in old if r.id in remaining]):
                # Not the full rows of those still deleting (_clean passes them over): a group's
                # nested stack is stepped again as each batch of its members is gone.
                deleting = [r for r in chunk if r.status != "IN_PROGRESS" and r.id not in started]
                for row in await self.slices.load(deleting):
                    self.slices.acted += await self._clean(row, remaining, needed)
                    if row.status == "IN_PROGRESS":
                        started.add(row.id)
                    await self.slices.tick()
                await self.slices.commit()
            # Another pass while one deleted rows at once: what they required may go now too
            # (a nested stack's deployments, then its server and config), not in one step each.
            if not remaining or len(remaining) == before:
                return bool(remaining)

    async def _clean(self, row: ResourceRow, remaining: set[int], needed: Counter[str]) -> bool:
        """Delete one replaced or removed resource unless it runs or another still needs it.

        True when it acted (started its DELETE or deleted it).
        """
        txn, stack = self.txn, self.stack
        if row.status == "IN_PROGRESS":
            return False  # its DELETE runs, or work a superseded traversal started finishes first
        if needed[row.name]:
            return False
        outcome = await handler_for(row.type).delete(txn, Res(stack, row.name, row.type), row)
        if outcome.status == "IN_PROGRESS":
            self.started = True
            row.action, row.status, row.traversal = "DELETE", "IN_PROGRESS", stack.traversal
            dep = in_session(txn, DeploymentRow, row.physical_id)
            txn.event(
                stack.id,
                row.name,
                "DELETE",
                "IN_PROGRESS",
                "",
                traversal=stack.traversal,
                deployment_id=row.physical_id,
                generation=dep.generation if dep is not None else None,
            )
            return True
        txn.event(stack.id, row.name, "DELETE", "COMPLETE", outcome.reason, traversal=stack.traversal)
        await txn.session.delete(row)
        remaining.discard(row.id)
        needed.subtract({n for n in (row.requires or []) if n != row.name})
        txn.kicks.add(stack.id)
        return True

    async def check(self) -> float | None:
        """Ask handlers that follow their own progress (deployment groups) how it goes.

        Returns the earliest time one of them asked to be asked again.
        """
        txn, stack = self.txn, self.stack
        soonest: float | None = None
        asked = [r.physical_id for r in self.rows if r.status == "IN_PROGRESS" and checker_for(r.type)]
        if len(asked) > 1:  # nested stacks' states in one query, not one per member of a group
            await nested.read_states(txn, [i for i in asked if i])
        full = await self._full_to_check()
        for listed in self.rows:
            checker = checker_for(listed.type)
            if listed.status != "IN_PROGRESS" or checker is None:
                continue
            row = listed if isinstance(listed, ResourceRow) else full.get(listed.id)
            if row is None:
                continue
            try:
                outcome = await checker.check(txn, Res(stack, row.name, row.type), row)
            except ControlError as e:
                outcome = Outcome("FAILED", row.physical_id, row.attributes, error_reason(e))
            if outcome.attributes is not row.attributes:  # a group still waiting rewrites nothing
                row.attributes = dict(outcome.attributes)
            if outcome.status == "IN_PROGRESS":
                soonest = nearest(soonest, outcome.wake_at)
            else:
                row.status, row.status_reason, row.updated_at = outcome.status, outcome.reason, time.time()
                txn.event(
                    stack.id, row.name, row.action, outcome.status, outcome.reason, traversal=stack.traversal
                )
                txn.kicks.add(stack.id)
            if isinstance(listed, Light):  # what the walk sees of it afterwards
                listed.status, listed.attributes = row.status, row.attributes
        return soonest

    async def _full_to_check(self) -> dict[int, ResourceRow]:
        """Full rows of the light records (a sliced step) ``check`` asks, in one query per SLICE.

        A light record of a template resource or group whose nested stack still runs is left
        out: its check would answer IN_PROGRESS, changing nothing. A group of 5,000 nested
        members read each member's full row in a query of its own on every step of its
        nested stack, stepped again as each batch of members settled.
        """
        ids = [
            r.id
            for r in self.rows
            if isinstance(r, Light)
            and r.status == "IN_PROGRESS"
            and checker_for(r.type) is not None
            and not (isinstance(handler_for(r.type), NESTING) and nested.running(self.txn, r.physical_id))
        ]
        return await self.slices.full(ids, keep=True)

    async def expire(self) -> float | None:
        """Fail deployments past their deadline; return the nearest deadline still ahead."""
        txn = self.txn
        waiting = {r.physical_id for r in self.rows if r.status == "IN_PROGRESS" and r.physical_id}
        if not waiting:
            return None
        # Three columns of the stack's deployments in progress: no item decoded, no IN list
        # (read ahead for a batch of sibling stacks in one query: engine/batch.py).
        found = txn.ahead.pop((idle.DEADLINES, self.stack.id), None)
        if found is None:
            found = (await idle.deadlines(txn.session, [self.stack.id]))[self.stack.id]
        soonest: float | None = None
        now = time.time()
        expired = []
        for dep_id, started_at, timeout in found:
            if dep_id not in waiting:
                continue
            deadline = (started_at or now) + timeout
            if deadline <= now:
                expired.append(dep_id)
            else:
                soonest = deadline if soonest is None else min(soonest, deadline)
        for dep_id in expired:
            dep = await txn.session.get(DeploymentRow, dep_id)
            if dep is None or dep.status != "IN_PROGRESS":
                continue
            dep.status, dep.status_reason = "FAILED", timed_out_reason(dep)
            dep.completed_at = dep.updated_at = now
            await settle(txn, dep)
            txn.later.append(
                functools.partial(_timed_out, txn.runtime.metrics, group_of(dep.item), dep.started_at, now)
            )
        return soonest


async def _timed_out(metrics: Metrics, group: str, started_at: float | None, now: float) -> None:
    """A generation that timed out is timed as FAILED once its step commits."""
    metrics.deployment_finished("FAILED", group, started_at, now)
