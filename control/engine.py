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
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm.exc import StaleDataError

from control import deploy, hot, lifecycle, stackdef
from control.errors import ControlError
from control.resources import DEPLOYMENT_TYPES, HANDLERS, REPLACE, Outcome, Res, forget_deployment
from control.runtime import Runtime
from control.store.orm import (
    ConfigRow,
    DeploymentRow,
    EventRow,
    ResourceRow,
    ServerRow,
    StackRow,
)
from control.txn import Txn

log = logging.getLogger(__name__)
IDLE_RECHECK = 30.0
SERVER_TYPES = frozenset({"OS::Heat::DeployedServer", "OS::Nova::Server"})


class Engine:
    """One asyncio task per stack in progress, woken by signals and deadlines."""

    def __init__(self, runtime: Runtime, definitions: stackdef.Definitions) -> None:
        self._rt = runtime
        self._defs = definitions
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}

    def kick(self, stack_id: str) -> None:
        """Make the stack's task take another step (starting it if needed)."""
        self._wake.setdefault(stack_id, asyncio.Event()).set()
        task = self._tasks.get(stack_id)
        if task is None or task.done():
            self._tasks[stack_id] = asyncio.create_task(self._run(stack_id), name=f"stack-{stack_id}")

    async def resume(self) -> None:
        """Pick up every stack a previous process left in progress."""
        async with self._rt.sessions() as session:
            ids = await session.scalars(select(StackRow.id).where(StackRow.status == "IN_PROGRESS"))
            for stack_id in ids:
                self.kick(stack_id)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, stack_id: str) -> None:
        wake = self._wake.setdefault(stack_id, asyncio.Event())
        while True:
            wake.clear()
            try:
                finished, deadline = await self._step(stack_id)
            except StaleDataError:
                log.info("stack %s: step raced a concurrent change; stepping again", stack_id)
                wake.set()
                continue
            except Exception as e:  # a bug must not leave the stack silently in progress
                log.exception("engine step failed for stack %s", stack_id)
                await self._fail_stack(stack_id, f"internal error: {e}")
                return
            if finished:
                return
            timeout = IDLE_RECHECK if deadline is None else max(0.0, deadline - time.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(timeout, IDLE_RECHECK))

    async def _step(self, stack_id: str) -> tuple[bool, float | None]:
        async with self._rt.sessions() as session:
            txn = Txn(session, self._rt)
            stack = await session.get(StackRow, stack_id)
            if stack is None or stack.status != "IN_PROGRESS":
                return True, None
            rows = list(await session.scalars(select(ResourceRow).where(ResourceRow.stack_id == stack_id)))
            loaded = await _preload(session, stack_id, rows)  # noqa: F841 (kept alive for the step)
            deadline = _nearest(await self._expire(txn, stack, rows), await self._check(txn, stack, rows))
            finished = await self._advance(txn, stack, rows)
            await txn.commit(self.kick)
            return finished, deadline

    async def _advance(self, txn: Txn, stack: StackRow, rows: list[ResourceRow]) -> bool:
        g = stack.traversal
        failed = [r for r in rows if r.status == "FAILED" and r.traversal == g]
        if failed:
            first = failed[0]
            await self._finish(
                txn, stack, "FAILED", f"Resource {first.action} failed: {first.name}: {first.status_reason}"
            )
            return True
        if stack.action in lifecycle.ACTIONS:
            return await self._lifecycle(txn, stack, rows)
        if stack.action != "DELETE":
            defn = self._defs.get(stack)
            current = {r.name: r for r in rows if r.current}
            pending = False
            for name in defn.order():
                row = current.get(name)
                if _done(row, g):
                    continue
                pending = True
                if row is not None and row.status == "IN_PROGRESS" and row.traversal == g:
                    continue
                if all(_done(current.get(d), g) for d in defn.requires(name)):
                    current[name] = await self._act(txn, stack, defn, name, row, current)
                    if current[name].status != "IN_PROGRESS":
                        txn.kicks.add(stack.id)  # done at once: its dependents can start now
            if pending:
                return False
        old = [r for r in rows if not r.current]
        if await self._cleanup(txn, stack, old):
            return False
        if stack.action == "DELETE":
            await self._purge(txn, stack)
        else:
            await self._finish(txn, stack, "COMPLETE", f"Stack {stack.action} completed successfully")
        return True

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
        current: Mapping[str, ResourceRow],
    ) -> ResourceRow:
        """Create, update or replace one resource; a problem fails that resource, not the step."""
        rdef = defn.template.resources[name]
        res, handler, requires = Res(stack, name, rdef.type), HANDLERS[rdef.type], defn.requires(name)
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
            txn.session.add(target)
            self._apply(txn, stack, target, "CREATE", await handler.create(txn, res, props), props, requires)
            return target
        except (ControlError, hot.TemplateError) as e:
            if target is None:
                target = _new_row(stack, name, rdef.type)
                txn.session.add(target)
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
        row.action, row.status, row.status_reason = action, outcome.status, outcome.reason
        row.physical_id = outcome.physical_id or row.physical_id
        row.attributes = dict(outcome.attributes)
        row.properties = props
        row.requires = requires
        row.traversal = stack.traversal
        row.updated_at = time.time()
        reason = outcome.reason or ("state changed" if outcome.status != "IN_PROGRESS" else "")
        txn.event(
            stack.id,
            row.name,
            action,
            outcome.status,
            reason,
            traversal=stack.traversal,
            deployment_id=row.physical_id if row.type in DEPLOYMENT_TYPES else None,
        )

    async def _cleanup(self, txn: Txn, stack: StackRow, old: list[ResourceRow]) -> bool:
        """Delete replaced and removed resources, dependents first; True while any remain."""
        remaining = list(old)
        for row in old:
            if row.status == "IN_PROGRESS" and row.action == "DELETE":
                continue
            if any(o is not row and row.name in (o.requires or []) and o.name != row.name for o in remaining):
                continue
            handler = HANDLERS.get(row.type)
            outcome = (
                await handler.delete(txn, Res(stack, row.name, row.type), row)
                if handler
                else Outcome("COMPLETE")
            )
            if outcome.status == "IN_PROGRESS":
                row.action, row.status, row.traversal = "DELETE", "IN_PROGRESS", stack.traversal
                txn.event(
                    stack.id,
                    row.name,
                    "DELETE",
                    "IN_PROGRESS",
                    "",
                    traversal=stack.traversal,
                    deployment_id=row.physical_id,
                )
                continue
            txn.event(stack.id, row.name, "DELETE", "COMPLETE", "", traversal=stack.traversal)
            await txn.session.delete(row)
            remaining.remove(row)
            txn.kicks.add(stack.id)
        return bool(remaining)

    async def _check(self, txn: Txn, stack: StackRow, rows: list[ResourceRow]) -> float | None:
        """Ask handlers that follow their own progress (deployment groups) how it goes.

        Returns the earliest time one of them asked to be asked again.
        """
        nearest: float | None = None
        for row in rows:
            check = getattr(HANDLERS.get(row.type), "check", None)
            if row.status != "IN_PROGRESS" or check is None:
                continue
            try:
                outcome: Outcome = await check(txn, Res(stack, row.name, row.type), row)
            except ControlError as e:
                outcome = Outcome("FAILED", row.physical_id, row.attributes, _where(e))
            row.attributes = dict(outcome.attributes)
            if outcome.status == "IN_PROGRESS":
                nearest = _nearest(nearest, outcome.wake_at)
                continue
            row.status, row.status_reason, row.updated_at = outcome.status, outcome.reason, time.time()
            txn.event(
                stack.id, row.name, row.action, outcome.status, outcome.reason, traversal=stack.traversal
            )
            txn.kicks.add(stack.id)
        return nearest

    async def _expire(self, txn: Txn, stack: StackRow, rows: list[ResourceRow]) -> float | None:
        """Fail deployments past their deadline; return the nearest deadline still ahead."""
        waiting = {r.physical_id: r for r in rows if r.status == "IN_PROGRESS" and r.physical_id}
        if not waiting:
            return None
        deps = await txn.session.scalars(
            select(DeploymentRow).where(
                DeploymentRow.id.in_(list(waiting)), DeploymentRow.status == "IN_PROGRESS"
            )
        )
        nearest: float | None = None
        now = time.time()
        for dep in deps:
            deadline = (dep.started_at or now) + dep.timeout
            if deadline <= now:
                dep.status, dep.status_reason = "FAILED", f"timed out after {dep.timeout:g} s"
                dep.completed_at = dep.updated_at = now
                await settle(txn, dep)
            else:
                nearest = deadline if nearest is None else min(nearest, deadline)
        return nearest

    async def _finish(self, txn: Txn, stack: StackRow, status: str, reason: str) -> None:
        stack.status, stack.status_reason, stack.updated_at = status, reason, time.time()
        txn.event(stack.id, "", stack.action, status, reason, traversal=stack.traversal)

    async def _purge(self, txn: Txn, stack: StackRow) -> None:
        """A deleted stack leaves nothing behind."""
        for table in (EventRow, ResourceRow, ConfigRow, DeploymentRow):
            await txn.session.execute(delete(table).where(table.stack_id == stack.id))
        await txn.session.delete(stack)
        self._defs.forget(stack.id)

    async def _fail_stack(self, stack_id: str, reason: str) -> None:
        async with self._rt.sessions() as session:
            txn = Txn(session, self._rt)
            stack = await session.get(StackRow, stack_id)
            if stack is not None and stack.status == "IN_PROGRESS":
                await self._finish(txn, stack, "FAILED", reason)
                await txn.commit()


async def settle(txn: Txn, dep: DeploymentRow) -> None:
    """Carry a deployment's result onto its resource and wake its stack."""
    if dep.stack_id is None:
        return
    row = await txn.session.scalar(
        select(ResourceRow).where(ResourceRow.stack_id == dep.stack_id, ResourceRow.physical_id == dep.id)
    )
    if row is None or row.status != "IN_PROGRESS":
        txn.kicks.add(dep.stack_id)  # a group member: its group looks on the next step
        return
    stack = await txn.session.get(StackRow, dep.stack_id)
    traversal = stack.traversal if stack is not None else row.traversal
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
    )
    if row.action == "DELETE" and dep.status == "COMPLETE":
        await forget_deployment(txn, dep)
        await txn.session.delete(row)
    txn.kicks.add(dep.stack_id)


async def _preload(session: Any, stack_id: str, rows: list[ResourceRow]) -> list[Any]:
    """Load the stack's deployments, configs and servers in three queries.

    Handlers then find them in the session instead of one query per resource; the
    returned list keeps them alive (the session's identity map holds weak references).
    """
    loaded: list[Any] = []
    loaded += (await session.scalars(select(DeploymentRow).where(DeploymentRow.stack_id == stack_id))).all()
    loaded += (await session.scalars(select(ConfigRow).where(ConfigRow.stack_id == stack_id))).all()
    server_ids = [r.physical_id for r in rows if r.physical_id and r.type in SERVER_TYPES]
    if server_ids:
        loaded += (await session.scalars(select(ServerRow).where(ServerRow.id.in_(server_ids)))).all()
    return loaded


def _nearest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _done(row: ResourceRow | None, traversal: int) -> bool:
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
