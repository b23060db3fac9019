"""The convergence engine: walks a stack's resources in dependency order.

State lives in the database only; the engine re-reads it on every step, so a
restarted control plane resumes every stack that was in progress. A step
starts every resource whose dependencies are done in the current traversal,
then waits to be woken (a signal arrived) or for the nearest deployment
deadline. Replaced and removed resources are deleted last, after every
current resource is done: the replacement exists before the old one goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm.exc import StaleDataError
from sqlalchemy.orm.util import identity_key

from control import hot
from control.engine import lifecycle, stackdef
from control.errors import ControlError
from control.resources import DEPLOYMENT_TYPES, HANDLERS, REPLACE, Outcome, Res, deploy, forget_deployment
from control.runtime import Runtime
from control.store import bulk, work
from control.store.orm import (
    ConfigRow,
    DeploymentRow,
    EventRow,
    ResourceRow,
    ServerRow,
    StackRow,
)
from control.store.workrow import WorkRow
from control.txn import Txn

log = logging.getLogger(__name__)
T = TypeVar("T")
EMPTY_TEMPLATE = {"heat_template_version": "2018-08-31", "resources": {}}
#: A stack waiting only for signals is stepped again after this long anyway (seconds).
IDLE_RECHECK = 30.0
#: A step that raced a concurrent change is retried after this long (seconds).
RACE_RETRY = 0.05
#: The longest a stack's next step waits for more changes to gather (seconds).
MAX_GATHER = 2.0
#: Stacks one process steps at the same time.
MAX_STEPPING = 16
#: A step of a stack with more resources than this commits every SLICE resources it acts on (_Slices).
SLICE = 2000
#: A step loads the stack row without its definition columns, held for the whole step for a
#: definition this process has cached (stackdef.Definitions) since the stack's first step.
_STACK_WITHOUT_DEFINITION = stackdef.without(*stackdef.DEFINITION_COLUMNS)
SERVER_TYPES = frozenset({"OS::Heat::DeployedServer", "OS::Nova::Server"})
#: Types whose handler follows its own progress (``check``): a step always asks them.
CHECKED_TYPES = frozenset(t for t, h in HANDLERS.items() if getattr(h, "check", None) is not None)


class Engine:
    """Steps stacks whose durable work rows (control/work.py) this process has leased.

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
        """A change for *stack_id* was committed (its work row with it): claim without waiting."""
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
        tasks = [*self._loops, *self._tasks.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

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
                    claims = []
                if claims:
                    log.info("%s claimed %s", self.owner, " ".join(c.stack_id for c in claims))
                for c in claims:
                    self._running[c.stack_id] = c
                    self._tasks[c.stack_id] = asyncio.create_task(self._work(c), name=f"stack-{c.stack_id}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._rt.settings.work_poll)

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            if not self._running:
                continue
            try:
                async with self._rt.sessions() as session:
                    lost = await work.renew(session, list(self._running.values()), self._lease)
            except DBAPIError as e:
                log.warning("renewing leases failed (retrying): %s", e)
                continue
            for stack_id in lost:
                log.warning("stack %s: lease lost to another process; stopping here", stack_id)
                task = self._tasks.get(stack_id)
                if task is not None:
                    task.cancel()

    async def _work(self, c: work.Claim) -> None:
        """Step the stack until it settles or waits; keep the lease while more steps are asked for."""
        try:
            while True:
                started = time.monotonic()
                finished, next_at = await self._one(c)
                async with self._rt.sessions() as session:
                    seq = await work.finish(session, c, done=finished, next_at=next_at)
                if seq is None:
                    return
                c = work.Claim(c.stack_id, c.token, seq)
                self._running[c.stack_id] = c
                # More was asked for during the step (signals arriving): let them gather for as
                # long as the step took, so a big stack is not re-walked per signal.
                await asyncio.sleep(min(time.monotonic() - started, MAX_GATHER))
        except work.LeaseLostError as e:
            log.info("%s", e)
        except DBAPIError as e:  # the lease runs out and the row is claimed again
            log.warning("stack %s: releasing work failed: %s", c.stack_id, e)
        finally:
            self._running.pop(c.stack_id, None)
            self._tasks.pop(c.stack_id, None)
            self._wake.set()

    async def _one(self, c: work.Claim) -> tuple[bool, float]:
        """One step; (settled, when to step next if not)."""
        try:
            finished, deadline = await self._step(c)
        except (StaleDataError, OperationalError) as e:
            log.info("stack %s: step raced a concurrent change (%s); stepping again", c.stack_id, e)
            return False, time.time() + RACE_RETRY
        except work.LeaseLostError:
            raise
        except Exception as e:  # a bug must not leave the stack silently in progress
            log.exception("engine step failed for stack %s", c.stack_id)
            await self._fail_stack(c, f"internal error: {e}")
            return True, 0.0
        now = time.time()
        return finished, min(deadline if deadline is not None else now + IDLE_RECHECK, now + IDLE_RECHECK)

    async def _step(self, c: work.Claim) -> tuple[bool, float | None]:
        async with self._rt.sessions() as session:
            waiting, deadline = await self._only_waiting(session, c.stack_id)
            if waiting:
                return False, deadline
        async with self._rt.sessions() as session:
            # Its changed deployments and resources go in one UPDATE per shape at each flush
            # (control/store/bulk.py); a failed write ends the step and the session rolls back.
            bulk.on_flush(session.sync_session, (DeploymentRow, ResourceRow))
            txn = Txn(session, self._rt)
            stack = await session.get(StackRow, c.stack_id, options=_STACK_WITHOUT_DEFINITION)
            if stack is None or stack.status != "IN_PROGRESS":
                return True, None
            defined = 0  # resources in the definition (a stack being deleted needs none)
            if stack.action != "DELETE":
                if self._defs.cached(stack.id, stack.version) is None:
                    await session.refresh(stack, attribute_names=list(stackdef.DEFINITION_COLUMNS))
                defined = len(self._defs.get(stack).template.resources)
            count = await session.scalar(select(func.count()).where(ResourceRow.stack_id == c.stack_id))
            slices = _Slices(self, c, txn, stack, max(count or 0, defined))
            rows = await slices.rows()
            # Load the stack's deployments, configs and servers only when some resource may act.
            acting = _may_act(stack, rows, defined)
            loaded = await _preload(session, c.stack_id, rows, slices.sliced) if acting else []  # noqa: F841
            deadline = _nearest(await self._expire(txn, stack, rows), await self._check(txn, stack, rows))
            finished = await self._advance(txn, stack, rows, slices)
            await work.fence(session, c, self._lease)
            await txn.commit(self.kick)
        return finished, deadline

    async def _only_waiting(self, session: Any, stack_id: str) -> tuple[bool, float | None]:
        """(True, nearest deadline) when every resource still to do waits for its signal.

        Then a step would change nothing, so it is answered from two aggregate queries
        that decrypt nothing, instead of loading and decoding every row of the stack:
        while 50,000 deployments report, most steps are this one. Anything else
        (a resource to start, one done or failed, a deadline passed, a group, a
        delete, a stack definition not yet parsed in this process) gives (False, None)
        and the full step runs.
        """
        found = (
            await session.execute(
                select(StackRow.action, StackRow.status, StackRow.traversal, StackRow.version).where(
                    StackRow.id == stack_id
                )
            )
        ).first()
        if found is None:
            return False, None
        action, status, g, version = found
        defn = self._defs.cached(stack_id, version)
        if status != "IN_PROGRESS" or action == "DELETE" or action in lifecycle.ACTIONS or defn is None:
            return False, None
        columns = (ResourceRow.status, ResourceRow.current, ResourceRow.traversal, ResourceRow.type)
        groups = await session.execute(
            select(*columns, func.count()).where(ResourceRow.stack_id == stack_id).group_by(*columns)
        )
        counted = [(r[0], r[1], r[2] == g, r[3], r[4]) for r in groups]
        if not _all_waiting(counted, len(defn.template.resources)):
            return False, None
        now = time.time()
        nearest = await session.scalar(
            select(func.min(func.coalesce(DeploymentRow.started_at, now) + DeploymentRow.timeout)).where(
                DeploymentRow.stack_id == stack_id, DeploymentRow.status == "IN_PROGRESS"
            )
        )
        if nearest is not None and nearest <= now:
            return False, None  # a deployment timed out: the full step fails it
        return True, nearest

    async def _advance(self, txn: Txn, stack: StackRow, rows: list[Any], slices: _Slices) -> bool:
        g = stack.traversal
        failed = [r for r in rows if r.status == "FAILED" and r.traversal == g]
        if failed:
            return await self._failed(txn, stack, rows, failed[0])
        if stack.action in lifecycle.ACTIONS:
            return await self._lifecycle(txn, stack, rows)
        if stack.action != "DELETE" and await self._walk(txn, stack, rows, slices):
            return False
        old = await slices.old(rows)
        if await self._cleanup(txn, stack, old, slices):
            return False
        if stack.action == "DELETE":
            await self._purge(txn, stack)
        else:
            await self._finish(txn, stack, "COMPLETE", f"Stack {stack.action} completed successfully")
        return True

    async def _walk(self, txn: Txn, stack: StackRow, rows: list[Any], slices: _Slices) -> bool:
        """Start every resource whose dependencies are done; True while any is not done."""
        g = stack.traversal
        defn = self._defs.get(stack)
        current: dict[str, ResourceRow | _Light] = {r.name: r for r in rows if r.current}
        pending = False
        for chunk in slices.of(defn.order()):
            await slices.realize(current, chunk)
            for name in chunk:
                row = current.get(name)
                if _done(row, g):
                    continue
                pending = True
                if row is not None and row.status == "IN_PROGRESS":
                    # Running on its server (this traversal or one an update superseded):
                    # it finishes, and its result is compared with this traversal's wishes then.
                    continue
                if all(_done(current.get(d), g) for d in defn.requires(name)):
                    if isinstance(row, _Light):
                        continue  # its row is gone since the step began: the next step walks what is left
                    current[name] = await self._act(txn, stack, defn, name, row, current)
                    slices.acted += 1
                    if current[name].status != "IN_PROGRESS":
                        txn.kicks.add(stack.id)  # done at once: its dependents can start now
            await slices.commit()
            slices.settle(current, chunk)
        return pending

    async def _failed(self, txn: Txn, stack: StackRow, rows: list[ResourceRow], first: ResourceRow) -> bool:
        """A resource failed in this traversal: roll back if asked to, else fail the stack."""
        reason = f"Resource {first.action} failed: {first.name}: {first.status_reason}"
        if stack.rollback and stack.action in ("CREATE", "UPDATE"):
            await self._start_rollback(txn, stack, rows, reason)
            return False
        await self._finish(txn, stack, "FAILED", reason)
        return True

    async def _start_rollback(self, txn: Txn, stack: StackRow, rows: list[ResourceRow], reason: str) -> None:
        """Go back to the definition before the failed create/update (after a create: to nothing)."""
        await txn.session.refresh(stack, attribute_names=["previous"])
        prev = stack.previous or {
            "template": EMPTY_TEMPLATE,
            "files": {},
            "environment": {},
            "params_given": {},
        }
        env = stackdef.environment_from_json(prev.get("environment") or {})
        defn = stackdef.build(
            prev["template"],
            prev.get("files") or {},
            env,
            prev.get("params_given") or {},
            stack_name=stack.name,
            stack_id=stack.id,
        )
        stack.template, stack.files = prev["template"], dict(prev.get("files") or {})
        stack.environment, stack.params_given = (
            dict(prev.get("environment") or {}),
            dict(prev.get("params_given") or {}),
        )
        stack.parameters = stackdef.plain(dict(defn.params.values))
        stack.hidden = sorted(defn.params.hidden)
        stack.version += 1
        stack.traversal += 1
        stack.action, stack.status, stack.updated_at = "ROLLBACK", "IN_PROGRESS", time.time()
        stack.status_reason = f"Stack ROLLBACK started: {reason}"
        stack.rollback, stack.previous = False, None
        keep = set(defn.order())
        for row in rows:
            if row.name not in keep:
                row.current = False
        txn.event(stack.id, "", "ROLLBACK", "IN_PROGRESS", stack.status_reason, traversal=stack.traversal)
        txn.kicks.add(stack.id)

    async def _lifecycle(self, txn: Txn, stack: StackRow, rows: list[ResourceRow]) -> bool:
        """SUSPEND or RESUME (control/lifecycle.py walks the resources)."""
        if not await lifecycle.advance(txn, stack, rows, self._defs.get(stack)):
            return False
        await self._finish(txn, stack, "COMPLETE", f"Stack {stack.action} completed successfully")
        return True

    async def _act(
        self,
        txn: Txn,
        stack: StackRow,
        defn: stackdef.Definition,
        name: str,
        row: ResourceRow | None,
        current: Mapping[str, ResourceRow | _Light],
    ) -> ResourceRow:
        """Create, update or replace one resource; a problem fails that resource, not the step."""
        rdef = defn.template.resources[name]
        res = Res(stack, name, rdef.type, rdef.update_policy)
        handler, requires = HANDLERS[rdef.type], defn.requires(name)
        target = row
        try:
            ctx = stackdef.StackContext(stack, defn, current)
            props = _with_defaults(
                rdef.type, stackdef.plain(hot.resolve(rdef.properties, ctx, f"resources.{name}.properties"))
            )
            if row is not None and row.status == "COMPLETE" and row.properties == props:
                row.traversal = stack.traversal
                return row
            if row is not None and row.status != "FAILED":
                outcome = await handler.update(txn, res, row, props)
                if outcome is not REPLACE:
                    self._apply(txn, stack, row, "UPDATE", outcome, props, requires)
                    return row
            if row is not None:
                row.current = False
                txn.event(
                    stack.id,
                    name,
                    "UPDATE",
                    "IN_PROGRESS",
                    f"replacing {row.physical_id}",
                    traversal=stack.traversal,
                )
            target = _new_row(stack, name, rdef.type)
            txn.add(target)
            self._apply(txn, stack, target, "CREATE", await handler.create(txn, res, props), props, requires)
            return target
        except (ControlError, hot.TemplateError) as e:
            if target is None:
                target = _new_row(stack, name, rdef.type)
                txn.add(target)
            reason = str(e) if isinstance(e, hot.TemplateError) else _where(e)
            action = "UPDATE" if target is row else "CREATE"
            self._apply(
                txn, stack, target, action, Outcome("FAILED", reason=reason), target.properties, requires
            )
            return target

    def _apply(
        self,
        txn: Txn,
        stack: StackRow,
        row: ResourceRow,
        action: str,
        outcome: Outcome,
        props: Any,
        requires: list[str],
    ) -> None:
        """Record *outcome* on *row*, and an event tied to the deployment generation it started."""
        row.action, row.status, row.status_reason = action, outcome.status, outcome.reason
        row.physical_id = outcome.physical_id or row.physical_id
        row.attributes = dict(outcome.attributes)
        row.properties = props
        row.requires = requires
        row.traversal = stack.traversal
        row.updated_at = time.time()
        reason = outcome.reason or ("state changed" if outcome.status != "IN_PROGRESS" else "")
        dep = _identity(txn, DeploymentRow, row.physical_id)
        txn.event(
            stack.id,
            row.name,
            action,
            outcome.status,
            reason,
            traversal=stack.traversal,
            deployment_id=row.physical_id if row.type in DEPLOYMENT_TYPES else None,
            generation=outcome.generation if dep is None else dep.generation,
        )

    async def _cleanup(self, txn: Txn, stack: StackRow, old: list[Any], slices: _Slices) -> bool:
        """Delete replaced and removed resources, dependents first; True while any remain."""
        remaining = {r.id for r in old}
        # How many remaining rows (of another name) require each name: O(1) per row, not O(N).
        needed: Counter[str] = Counter(n for o in old for n in set(o.requires or []) if n != o.name)
        for chunk in slices.of(old):
            for row in await slices.load(chunk):
                slices.acted += await self._clean(txn, stack, row, remaining, needed)
            await slices.commit()
        return bool(remaining)

    async def _clean(
        self,
        txn: Txn,
        stack: StackRow,
        row: ResourceRow,
        remaining: set[int],
        needed: Counter[str],
    ) -> bool:
        """Delete one replaced or removed resource unless it runs or another still needs it.

        True when it acted (started its DELETE or deleted it).
        """
        if row.status == "IN_PROGRESS":
            return False  # its DELETE runs, or work a superseded traversal started finishes first
        if needed[row.name]:
            return False
        handler = HANDLERS.get(row.type)
        outcome = (
            await handler.delete(txn, Res(stack, row.name, row.type), row) if handler else Outcome("COMPLETE")
        )
        if outcome.status == "IN_PROGRESS":
            row.action, row.status, row.traversal = "DELETE", "IN_PROGRESS", stack.traversal
            dep = _identity(txn, DeploymentRow, row.physical_id)
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

    async def _check(self, txn: Txn, stack: StackRow, rows: list[Any]) -> float | None:
        """Ask handlers that follow their own progress (deployment groups) how it goes.

        Returns the earliest time one of them asked to be asked again.
        """
        nearest: float | None = None
        for listed in rows:
            check = getattr(HANDLERS.get(listed.type), "check", None)
            if listed.status != "IN_PROGRESS" or check is None:
                continue
            row = listed if isinstance(listed, ResourceRow) else await txn.session.get(ResourceRow, listed.id)
            if row is None:
                continue
            try:
                outcome: Outcome = await check(txn, Res(stack, row.name, row.type), row)
            except ControlError as e:
                outcome = Outcome("FAILED", row.physical_id, row.attributes, _where(e))
            if outcome.attributes is not row.attributes:  # a group still waiting rewrites nothing
                row.attributes = dict(outcome.attributes)
            if outcome.status == "IN_PROGRESS":
                nearest = _nearest(nearest, outcome.wake_at)
            else:
                row.status, row.status_reason, row.updated_at = outcome.status, outcome.reason, time.time()
                txn.event(
                    stack.id, row.name, row.action, outcome.status, outcome.reason, traversal=stack.traversal
                )
                txn.kicks.add(stack.id)
            if isinstance(listed, _Light):  # what the walk sees of it afterwards
                listed.status, listed.attributes = row.status, row.attributes
        return nearest

    async def _expire(self, txn: Txn, stack: StackRow, rows: list[Any]) -> float | None:
        """Fail deployments past their deadline; return the nearest deadline still ahead."""
        waiting = {r.physical_id for r in rows if r.status == "IN_PROGRESS" and r.physical_id}
        if not waiting:
            return None
        # Three columns of the stack's deployments in progress: no item decoded, no IN list.
        found = await txn.session.execute(
            select(DeploymentRow.id, DeploymentRow.started_at, DeploymentRow.timeout).where(
                DeploymentRow.stack_id == stack.id, DeploymentRow.status == "IN_PROGRESS"
            )
        )
        nearest: float | None = None
        now = time.time()
        expired = []
        for dep_id, started_at, timeout in found.tuples():
            if dep_id not in waiting:
                continue
            deadline = (started_at or now) + timeout
            if deadline <= now:
                expired.append(dep_id)
            else:
                nearest = deadline if nearest is None else min(nearest, deadline)
        for dep_id in expired:
            dep = await txn.session.get(DeploymentRow, dep_id)
            if dep is None or dep.status != "IN_PROGRESS":
                continue
            dep.status, dep.status_reason = "FAILED", timed_out_reason(dep)
            dep.completed_at = dep.updated_at = now
            await settle(txn, dep)
        return nearest

    async def _finish(self, txn: Txn, stack: StackRow, status: str, reason: str) -> None:
        stack.status, stack.status_reason, stack.updated_at = status, reason, time.time()
        if status == "COMPLETE":
            stack.previous = None  # a later rollback returns here, not further back
        txn.event(stack.id, "", stack.action, status, reason, traversal=stack.traversal)

    async def _purge(self, txn: Txn, stack: StackRow) -> None:
        """A deleted stack leaves nothing behind but its events (queryable by its name)."""
        txn.event(
            stack.id,
            "",
            "DELETE",
            "COMPLETE",
            "Stack DELETE completed successfully",
            traversal=stack.traversal,
        )
        await txn.write_events()  # flushed by the UPDATE below, which names them all
        await txn.session.execute(
            update(EventRow).where(EventRow.stack_id == stack.id).values(stack_name=stack.name)
        )
        for table in (ResourceRow, ConfigRow, DeploymentRow):
            await txn.session.execute(delete(table).where(table.stack_id == stack.id))
        await txn.session.delete(stack)
        self._defs.forget(stack.id)

    async def _fail_stack(self, c: work.Claim, reason: str) -> None:
        async with self._rt.sessions() as session:
            txn = Txn(session, self._rt)
            stack = await session.get(StackRow, c.stack_id)
            if stack is not None and stack.status == "IN_PROGRESS":
                await self._finish(txn, stack, "FAILED", reason)
                await work.fence(session, c, self._lease)
                await txn.commit()


async def settle(
    txn: Txn,
    dep: DeploymentRow,
    resources: Mapping[str, ResourceRow | None] | None = None,
    traversals: Mapping[str, int] | None = None,
) -> None:
    """Carry a deployment's result onto its resource and wake its stack.

    *resources* (deployment id -> its resource row, or None for none) and
    *traversals* (stack id -> its traversal) let a caller that settles many
    deployments at once (control/signals/batch.py) load them in one query each.
    """
    if dep.stack_id is None:
        return
    if resources is not None and dep.id in resources:
        row = resources[dep.id]
    else:
        row = await txn.session.scalar(
            select(ResourceRow).where(ResourceRow.stack_id == dep.stack_id, ResourceRow.physical_id == dep.id)
        )
    if row is None or row.status != "IN_PROGRESS":
        txn.kicks.add(dep.stack_id)  # a group member: its group looks on the next step
        return
    # Only the traversal number: loading the stack row would decrypt and decode its whole
    # template (and parameters) once per signal, which made signals O(stack size).
    stack = _identity(txn, StackRow, dep.stack_id)
    if stack is not None:
        traversal: int | None = stack.traversal
    elif traversals is not None and dep.stack_id in traversals:
        traversal = traversals[dep.stack_id]
    else:
        traversal = await txn.session.scalar(select(StackRow.traversal).where(StackRow.id == dep.stack_id))
    traversal = traversal if traversal is not None else row.traversal
    row.status, row.status_reason, row.updated_at = dep.status, dep.status_reason, time.time()
    row.attributes = deploy.attributes(dep)
    txn.event(
        dep.stack_id,
        row.name,
        row.action,
        dep.status,
        dep.status_reason,
        traversal=traversal,
        deployment_id=dep.id,
        generation=dep.generation,
    )
    if row.action == "DELETE" and dep.status == "COMPLETE":
        await forget_deployment(txn, dep)
        await txn.session.delete(row)
    txn.kicks.add(dep.stack_id)


@dataclass(slots=True)
class _Light:
    """A resource as a big step holds it while it does not act on it: no ORM object, no properties.

    A full row with its instance state and decrypted properties is about 4 KB of
    Python objects; this is a fifth of that. It carries what the walk (``_done``),
    the expressions of dependent resources (``StackContext``: ``physical_id``,
    ``attributes``) and the cleanup's ordering (``requires``) read.
    """

    id: int
    name: str
    type: str
    status: str
    traversal: int
    current: bool
    physical_id: str | None
    attributes: Mapping[str, Any]
    requires: list[Any]

    @classmethod
    def of(cls, row: ResourceRow) -> _Light:
        return cls(
            row.id,
            row.name,
            row.type,
            row.status,
            row.traversal,
            row.current,
            row.physical_id,
            row.attributes,
            row.requires,
        )


_LIGHT_COLUMNS = [getattr(ResourceRow, f) for f in _Light.__dataclass_fields__]


class _Slices:
    """A big stack's step commits every ``SLICE`` resources it acts on, not once at the end.

    One transaction for a whole 50,000-deployment stack held every new row, its
    decrypted values and the flush's parameters in memory at once (1 GB), and
    loaded every resource and deployment of the stack (with their decrypted
    properties and derived configs) for an update that touches a tenth of them.
    A sliced step acts on one slice and commits it (fenced by the lease, like the
    step's own commit) before the next. What it holds across slices is a light
    record per resource (``_Light``); a slice's full rows are loaded when it
    starts (``realize``, ``load``) and let go once it commits (``settle``). It
    loads no deployment up front: walking a create or update, a handler loads
    the deployment it acts on (an update of 10 % reads 10 % of them); deleting,
    each slice's deployments are loaded in one query. Each commit publishes the
    slice's documents, so agents start while later slices are still being
    written. The stack's version is read before every slice's commit: a stack
    updated meanwhile ends the step (``StaleDataError``, the step is retried
    against the new definition), so nothing more of the old traversal starts. A
    crash between slices leaves the committed slices, as a crash between two
    steps would. A stack of ``SLICE`` resources or fewer is stepped in one
    transaction with full rows, as before; so is a SUSPEND or RESUME, and a step
    that finds a failed resource (a rollback rewrites rows across the stack).
    """

    def __init__(self, engine: Engine, claim: work.Claim, txn: Txn, stack: StackRow, size: int) -> None:
        self._engine, self._claim, self._txn, self._stack = engine, claim, txn, stack
        self.sliced = size > SLICE
        #: True when the step holds _Light records instead of full rows.
        self.light = False
        #: Resources acted on since the last commit.
        self.acted = 0
        self._loaded: list[Any] = []
        self._kept: list[Any] = []

    async def rows(self) -> list[Any]:
        """The stack's resources: light records for a sliced walk, else full rows."""
        session, stack = self._txn.session, self._stack
        where = ResourceRow.stack_id == stack.id
        if self.sliced and stack.action not in lifecycle.ACTIONS:
            light = [_Light(*r) for r in await session.execute(select(*_LIGHT_COLUMNS).where(where))]
            if not any(r.status == "FAILED" and r.traversal == stack.traversal for r in light):
                self.light = True
                return light
        return list(await session.scalars(select(ResourceRow).where(where)))

    def of(self, items: list[T]) -> list[list[T]]:
        if not self.sliced:
            return [items]
        return [items[start : start + SLICE] for start in range(0, len(items), SLICE)]

    async def _full(self, ids: list[int]) -> dict[int, ResourceRow]:
        if not ids:
            return {}
        found = await self._txn.session.scalars(select(ResourceRow).where(ResourceRow.id.in_(ids)))
        return {r.id: r for r in found}

    async def realize(self, current: dict[str, ResourceRow | _Light], names: list[str]) -> None:
        """Replace the light records of *names* that may act in this traversal by full rows."""
        g = self._stack.traversal
        light = [
            r
            for r in (current.get(n) for n in names)
            if isinstance(r, _Light) and not _done(r, g) and r.status != "IN_PROGRESS"
        ]
        full = await self._full([r.id for r in light])
        for r in light:
            if r.id in full:
                current[r.name] = full[r.id]

    def settle(self, current: dict[str, ResourceRow | _Light], names: list[str]) -> None:
        """After a slice's commit: keep light records of *names* (the walk never acts on them again)."""
        if self.light:
            for n in names:
                row = current.get(n)
                if isinstance(row, ResourceRow):
                    current[n] = _Light.of(row)

    async def old(self, rows: list[Any]) -> list[Any]:
        """Replaced and removed resources (read again after a sliced walk: it committed)."""
        if not self.light:
            return [r for r in rows if not r.current]
        where = (ResourceRow.stack_id == self._stack.id, ResourceRow.current.is_(False))
        return [_Light(*r) for r in await self._txn.session.execute(select(*_LIGHT_COLUMNS).where(*where))]

    async def load(self, rows: list[Any]) -> list[ResourceRow]:
        """Full rows of *rows* and their deployments, each in one query (a small step has them all)."""
        if not self.sliced:
            return rows
        full = await self._full([r.id for r in rows if isinstance(r, _Light)])
        out = [
            r if isinstance(r, ResourceRow) else full[r.id]
            for r in rows
            if isinstance(r, ResourceRow) or r.id in full
        ]
        ids = [r.physical_id for r in out if r.physical_id and r.type in DEPLOYMENT_TYPES]
        self._loaded = []  # the previous slice's rows may go (the identity map holds them weakly)
        if ids:
            found = await self._txn.session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(ids)))
            self._loaded = list(found)
        return out

    async def commit(self) -> None:
        """Commit what the slice did (sliced steps only)."""
        if not self.sliced or not self.acted:
            return
        session, stack = self._txn.session, self._stack
        version = await session.scalar(select(StackRow.version).where(StackRow.id == stack.id))
        if version != stack.version:
            raise StaleDataError(
                f"stack {stack.id} changed during the step (version {stack.version} -> {version})"
            )
        await work.fence(session, self._claim, self._engine._lease)
        await self._txn.commit(self._engine.kick)
        # Servers and configs a later slice's deployments look up stay in the identity map;
        # resources, deployments and events go (the identity map holds rows weakly).
        self._kept += [r for r in self._txn.created.values() if isinstance(r, ServerRow | ConfigRow)]
        self._txn.restart()
        self.acted = 0


async def _preload(session: Any, stack_id: str, rows: list[ResourceRow], sliced: bool) -> list[Any]:
    """Load the stack's deployments (unless *sliced*: then per slice), configs and servers.

    Handlers then find them in the session instead of one query per resource; the
    returned list keeps them alive (the session's identity map holds weak references).
    """
    loaded: list[Any] = []
    if not sliced:
        query = select(DeploymentRow).where(DeploymentRow.stack_id == stack_id)
        loaded += (await session.scalars(query)).all()
    loaded += (await session.scalars(select(ConfigRow).where(ConfigRow.stack_id == stack_id))).all()
    server_ids = [r.physical_id for r in rows if r.physical_id and r.type in SERVER_TYPES]
    if server_ids:
        loaded += (await session.scalars(select(ServerRow).where(ServerRow.id.in_(server_ids)))).all()
    return loaded


def timed_out_reason(dep: DeploymentRow) -> str:
    """ "timed out after N s", with the last output the control plane has for this generation."""
    reason = f"timed out after {dep.timeout:g} s"
    progress = getattr(dep, "progress", None) or {}
    text = str(progress.get("output_tail") or "") if progress.get("generation") == dep.generation else ""
    text = text or (dep.stdout or "") + "\n" + (dep.stderr or "")
    tail = [line for line in text.splitlines() if line.strip()]
    if tail:
        reason += "; last output: " + " | ".join(tail[-3:])[-500:]
    else:
        reason += "; no progress received"
    return reason


def _identity(txn: Txn, cls: type[T], key: str | None) -> T | None:
    """A row already in the session (preloaded or just added), without a query."""
    if not key:
        return None
    found = txn.session.sync_session.identity_map.get(identity_key(cls, key))
    return found if isinstance(found, cls) else None


def _nearest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _may_act(stack: StackRow, rows: list[ResourceRow], defined: int) -> bool:
    """False when every resource is done in this traversal or waiting for its signal."""
    if stack.action == "DELETE" or stack.action in lifecycle.ACTIONS:
        return True
    return (
        any(not r.current or (r.status != "IN_PROGRESS" and not _done(r, stack.traversal)) for r in rows)
        or len(rows) < defined
    )


def _all_waiting(groups: list[tuple[str, bool, bool, str, int]], expected: int) -> bool:
    """Over (status, current, in this traversal, type, count) groups of a stack's resources:
    True when at least one waits for its signal and every other one is done."""
    total = waiting = 0
    for status, current, this_traversal, type_name, count in groups:
        total += count
        if not current or (type_name in CHECKED_TYPES and status == "IN_PROGRESS"):
            return False
        if status == "IN_PROGRESS":
            waiting += count
        elif not (status == "COMPLETE" and this_traversal):
            return False  # failed, or to start or update in this traversal
    return waiting > 0 and total >= expected


def _done(row: ResourceRow | _Light | None, traversal: int) -> bool:
    return row is not None and row.status == "COMPLETE" and row.traversal == traversal


def _new_row(stack: StackRow, name: str, type_name: str) -> ResourceRow:
    now = time.time()
    return ResourceRow(
        stack_id=stack.id,
        name=name,
        type=type_name,
        action="INIT",
        status="INIT",
        created_at=now,
        updated_at=now,
        current=True,
        attributes={},
    )


def _with_defaults(type_name: str, props: Any) -> Any:
    spec = hot.TYPES.get(type_name)
    if spec is None or not isinstance(props, dict):
        return props
    return stackdef.plain(hot.apply_defaults(spec, props))


def _where(e: ControlError) -> str:
    return f"{e.where}: {e.message}" if e.where else e.message
