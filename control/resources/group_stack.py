"""Groups whose members are the resources of a nested stack the group writes.

OS::Heat::ResourceGroup and OS::Heat::AutoScalingGroup, as in Heat: the group's nested
stack has one resource per member (any type: servers with real agents, deployments,
template resources) and outputs for what the parent reads of the group. The group keeps
a plan in its attributes (``anneal:plan``: the target definition and size, the batches
still to run, the pause between them); each batch is one update of the nested stack,
and ``check`` starts the next one (after the pause) once the nested stack is COMPLETE.
A type says how it names and orders its members (``resources``), what its nested
template outputs (``outputs``) and what attributes it adds (``attributes``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from control import hot
from control.resources import canary, nested
from control.resources.base import Outcome, Res, done
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from control.txn import Txn

#: The group's plan: target definition and size, batches to run, pause, what the parent reads.
STATE = "anneal:plan"
#: Member names in the group's order (``refs`` and member attributes as lists follow it).
ORDER = "anneal:order"
TEMPLATE_VERSION = "2018-08-31"


def wants(res: Res) -> list[list[Any]] | None:
    """The attribute paths the parent reads of the group, as JSON (None: some are computed)."""
    if res.nest is None or res.nest.wants is None:
        return None
    return sorted((list(p) for p in res.nest.wants), key=str)


class GroupStack:
    """Create, change and follow a group's nested stack, batch by batch."""

    #: The property holding the member definition.
    member_property = "resource_def"

    def plan(
        self, res: Res, props: Mapping[str, Any], row: ResourceRow | None, old: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What the group becomes (``target``, ``batches`` of ``[size, changes]``, ``pause``)."""
        raise NotImplementedError

    def resources(
        self, plan: dict[str, Any], old: Mapping[str, Any], size: int, changes: int
    ) -> dict[str, Any]:
        """The members after one batch: name -> definition; *old*: the current members."""
        raise NotImplementedError

    def outputs(self, names: list[str], paths: list[list[Any]] | None) -> dict[str, Any]:
        """The nested template's outputs for the member *names* and the paths the parent reads."""
        raise NotImplementedError

    def attributes(self, out: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
        """What the group adds to its nested stack's outputs as its attributes."""
        raise NotImplementedError

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        plan = self.plan(res, props, None, {})
        built = self._parts(res, props, self._template(plan, {}))
        child = await nested.start_child(txn, res, built)
        return Outcome("IN_PROGRESS", child.id, {STATE: plan, nested.SOURCE: self._digest(res, built)})

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        child = await nested.get_child(txn, row.physical_id)
        if child is None:
            return await self.create(txn, res, props)
        old = dict((child.template or {}).get("resources") or {})
        plan = self.plan(res, props, row, old)
        built = self._parts(res, props, self._template(plan, old))
        if plan.get("canary"):  # the canary: the members this first batch gives the new definition
            members = built["template"]["resources"]
            plan["canary"]["members"] = sorted(n for n, d in members.items() if old.get(n) != d)
        await nested.update_child(txn, res, child, built)
        attributes = {**row.attributes, STATE: plan, nested.SOURCE: self._digest(res, built)}
        return Outcome("IN_PROGRESS", child.id, attributes)

    def changed(self, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> bool:
        return (row.attributes or {}).get(nested.SOURCE) != self._digest(res, self._parts(res, props, {}))

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        child = await nested.get_child(txn, row.physical_id)
        if child is None:
            return done()
        await nested.delete_child(txn, child)
        return Outcome("IN_PROGRESS", child.id, row.attributes)

    async def check(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        """While the nested stack runs, wait; when it is done, start the next batch or finish."""
        state = await nested.child_state(txn, row.physical_id)
        plan = dict(row.attributes.get(STATE) or {})
        test = plan.get("canary") if row.action == "UPDATE" else None  # a suspend has none
        if state is not None and state.status != "IN_PROGRESS" and test and not test.get("passed"):
            members = await _members(txn, state.id, test["members"])
            if any(m[1] == "IN_PROGRESS" for m in members):  # a signal lands on the member's row
                return Outcome("IN_PROGRESS", row.physical_id, row.attributes, wake_at=time.time() + 1)
            why = canary.judge(txn, res, test, members)
            if why is not None:
                return Outcome("FAILED", row.physical_id, {**row.attributes, STATE: plan}, why)
            if test["pause"] and plan.get("batches"):
                plan["pause_until"] = time.time() + test["pause"]
        elif state is None or state.status != "COMPLETE":
            return nested.child_outcome(row, state, {})
        # A group the stack no longer wants (being deleted, removed) starts no more batches.
        if plan.get("batches") and row.action in ("CREATE", "UPDATE") and row.current:
            now = time.time()
            if plan.get("pause") and plan.get("pause_until") is None:
                plan["pause_until"] = now + float(plan["pause"])
            if plan.get("pause_until") and now < plan["pause_until"]:
                attributes = {**row.attributes, STATE: plan}
                return Outcome("IN_PROGRESS", row.physical_id, attributes, wake_at=plan["pause_until"])
            await self.next_batch(txn, res, row, plan)
            return Outcome("IN_PROGRESS", row.physical_id, {**row.attributes, STATE: plan})
        self.finished(plan)
        out = await nested.child_outputs(txn, state.id)
        attributes = {**out, **self.attributes(out, plan), STATE: plan}
        attributes[nested.SOURCE] = (row.attributes or {}).get(nested.SOURCE)
        return nested.child_outcome(row, state, attributes)

    def finished(self, plan: dict[str, Any]) -> None:
        """The plan's last batch is done (a scaling group starts its cooldown here)."""

    async def next_batch(self, txn: Txn, res: Res, row: ResourceRow, plan: dict[str, Any]) -> StackRow:
        """Update the nested stack to the plan's next batch (its files and environment kept)."""
        child = await nested.get_child(txn, row.physical_id)
        if child is None:
            raise nested.gone(row)
        built = {
            "template": self._template(plan, dict(child.template.get("resources") or {})),
            "files": child.files,
            "environment": hot.environment_from_json(child.environment),
            "params": {},
        }
        await nested.update_child(txn, res, child, built)
        plan["pause_until"] = None
        return child

    async def suspend(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await nested.lifecycle(txn, row, "SUSPEND")

    async def resume(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await nested.lifecycle(txn, row, "RESUME")

    def _template(self, plan: dict[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
        """The nested template of the plan's next batch, which is taken off the plan."""
        size = int(plan["target"]["count"])
        size, changes = plan["batches"].pop(0) if plan["batches"] else (size, size)
        members = self.resources(plan, old, size, changes)
        return {
            "heat_template_version": TEMPLATE_VERSION,
            "resources": members,
            "outputs": self.outputs(list(members), plan.get("wants")),
        }

    def _parts(self, res: Res, props: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
        """The nested stack's template, the files its members' type reaches, its environment."""
        assert res.nest is not None, "a group acts with its Nest"
        env = hot.child_environment(res.nest.environment, res.name)
        member_type = (props.get(self.member_property) or {}).get("type")
        roots = [member_type] if isinstance(member_type, str) else []
        return {
            "template": hot.plain(template),
            "files": hot.child_files(res.stack.files, roots, env),
            "environment": env,
            "params": {},
        }

    def _digest(self, res: Res, built: Mapping[str, Any]) -> str:
        return nested.digest(built["files"], hot.environment_to_json(built["environment"]), wants(res))


def definition(res: Res, props: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The member definition in property *key*: its type, properties and metadata."""
    rdef = props.get(key)
    if not isinstance(rdef, Mapping) or not isinstance(rdef.get("type"), str):
        raise hot.TemplateError(f"{res.where}.properties.{key}", "expected a map with a type")
    return {
        "type": rdef["type"],
        "properties": dict(rdef.get("properties") or {}),
        "metadata": dict(rdef.get("metadata") or {}),
    }


async def _members(txn: Txn, child_id: str, names: list[str]) -> list[canary.Member]:
    """The canary members' states in the nested stack (it fails at its first failed member, as
    Heat's does, so others may still run). A member not acted on in its last traversal has not
    started; a deployment past its timeout is FAILED (nobody times out a failed stack's ones)."""
    traversal = await txn.session.scalar(select(StackRow.traversal).where(StackRow.id == child_id))
    rows = list(
        await txn.session.scalars(
            select(ResourceRow).where(ResourceRow.stack_id == child_id, ResourceRow.name.in_(names))
        )
    )
    found = {
        r.name: (r.name, r.status if r.traversal == traversal else "NOT STARTED", r.status_reason)
        for r in rows
    }
    running = [r.physical_id for r in rows if found[r.name][1] == "IN_PROGRESS" and r.physical_id]
    now = time.time()
    for dep in await txn.session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(running))):
        if dep.status == "IN_PROGRESS" and (dep.started_at or now) + dep.timeout <= now:
            name = next(r.name for r in rows if r.physical_id == dep.id)
            found[name] = (name, "FAILED", f"timed out after {dep.timeout:g} s")
    return [found.get(n, (n, "NOT STARTED", "")) for n in names]
