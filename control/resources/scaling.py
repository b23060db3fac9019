"""OS::Heat::AutoScalingGroup and OS::Heat::ScalingPolicy.

The group is a nested stack of ``resource`` members named by short random ids (Heat's
``short_id``), oldest first; it starts at ``desired_capacity`` (else ``min_size``).
A policy's signal (its ``signal_url``/``alarm_url``, or ``anneal stack resource signal``)
adjusts the group's size by ``scaling_adjustment`` of ``adjustment_type``, within
``min_size``..``max_size``, unless the group is changing or in its cooldown: the group
resource goes UPDATE IN_PROGRESS while its nested stack adds members (new servers, their
agents, their deployments) or removes the oldest (their DELETE configs run, then their
servers and agents go), while the stack itself stays as it was, as in Heat.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import or_, select

from control import hot
from control.errors import BadRequestError, ConflictError
from control.resources import batches, nested
from control.resources.base import Outcome, Res, done
from control.resources.group_stack import ORDER, STATE, GroupStack, definition, wants
from control.resources.provider import hidden_output
from control.store.orm import ResourceRow
from control.txn import Txn

AUTO_SCALING_GROUP = "OS::Heat::AutoScalingGroup"
SCALING_POLICY = "OS::Heat::ScalingPolicy"


def new_capacity(
    current: int, adjustment: float, kind: str, min_step: int | None, low: int, high: int
) -> int:
    """The size an adjustment asks for, kept within *low*..*high* (Heat's arithmetic)."""
    if kind == "change_in_capacity":
        wanted = current + int(adjustment)
    elif kind == "exact_capacity":
        wanted = int(adjustment)
    else:
        delta = current * adjustment / 100.0
        rounded = (math.ceil(delta) if delta > 0 else math.floor(delta)) if abs(delta) < 1 else int(delta)
        if min_step and min_step > abs(rounded):
            rounded = min_step if rounded > 0 else -min_step
        wanted = current + rounded
    return max(low, min(high, wanted))


def read(attributes: Mapping[str, Any], name: str, path: list[Any]) -> Any:
    """``get_attr: [group, name, *path]``: outputs, outputs_list, current_size, refs, refs_map,
    resource.<index>[.<attr>] (the index-th member, oldest first)."""
    order = list(attributes.get(ORDER) or [])
    refs = attributes.get("refs_map") or {}
    if name.startswith("resource."):
        return _member(attributes, order, name[len("resource.") :], path)
    if name in ("outputs", "outputs_list"):
        found = attributes.get(hidden_output(["outputs", *path])) or {}
        return {n: found.get(n) for n in order} if name == "outputs" else [found.get(n) for n in order]
    own = {
        "current_size": len(order),
        "refs": [refs.get(n) for n in order],
        "refs_map": {n: refs.get(n) for n in order},
    }
    return hot.select(own.get(name), path)


def _member(attributes: Mapping[str, Any], order: list[str], rest: str, path: list[Any]) -> Any:
    """``resource.<index>`` (its id) or ``resource.<index>.<attr>`` of the index-th member."""
    index, _, attribute = rest.partition(".")
    if not index.isdigit() or int(index) >= len(order):
        return None
    target = order[int(index)]
    if not attribute:
        return hot.select((attributes.get("refs_map") or {}).get(target), path)
    return (attributes.get(hidden_output(["outputs", attribute, *path])) or {}).get(target)


class AutoScalingGroup(GroupStack):
    """Members by short id, oldest first; resized by its policies' signals."""

    member_property = "resource"
    #: Whether a member due for a new definition is replaced by a new one (InstanceGroup).
    replaces = False

    def plan(
        self, res: Res, props: Mapping[str, Any], row: ResourceRow | None, old: Mapping[str, Any]
    ) -> dict[str, Any]:
        low, high = _bounds(res, props)
        desired = props.get("desired_capacity")
        before = dict(row.attributes.get(STATE) or {}) if row is not None else {}
        if desired is not None:
            size = int(desired)
        else:
            size = len(before.get("members") or []) if row is not None else low
        size = max(low, min(high, size))
        plan: dict[str, Any] = {
            "target": {"definition": definition(res, props, "resource"), "count": size},
            "members": [n for n in before.get("members") or [] if n in old],
            "batches": [[size, size]],
            "pause": 0,
            "pause_until": None,
            "wants": wants(res),
            "cooldown_end": before.get("cooldown_end"),
        }
        rolling = props.get("rolling_updates") or {}
        if row is not None and (before.get("target") or {}).get("definition") != plan["target"]["definition"]:
            size_, keep = int(rolling.get("max_batch_size", 1)), int(rolling.get("min_in_service", 0))
            plan["batches"] = (
                batches.batches(size, len(plan["members"]), max(1, size_), keep) or plan["batches"]
            )
            plan["pause"] = float(rolling.get("pause_time", 0))
        return plan

    def resources(
        self, plan: dict[str, Any], old: Mapping[str, Any], size: int, changes: int
    ) -> dict[str, Any]:
        order = [n for n in plan["members"] if n in old]
        ordered = {n: old[n] for n in order}
        definition = dict(plan["target"]["definition"])
        out = batches.members(ordered, lambda n: dict(definition), [], size, changes, _fresh(), self.replaces)
        plan["members"] = [n for n in order if n in out] + [n for n in out if n not in order]
        return {n: out[n] for n in plan["members"]}

    def outputs(self, names: list[str], paths: list[list[Any]] | None) -> dict[str, Any]:
        out: dict[str, Any] = {"refs_map": {"value": {n: {"get_resource": n} for n in names}}}
        for path in paths or ():
            key = path[0] if path and isinstance(path[0], str) else ""
            if key in ("outputs", "outputs_list") and len(path) > 1 and isinstance(path[1], str):
                inner = list(path[1:])
            elif key.startswith("resource.") and key.count(".") >= 2:
                inner = [key.split(".", 2)[2], *path[1:]]
            else:
                continue
            value = {n: {"get_attr": [n, *inner]} for n in names}
            out[hidden_output(["outputs", *inner])] = {"value": value}
        return out

    def attributes(self, out: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
        return {ORDER: [n for n in plan["members"] if n in (out.get("refs_map") or {})]}

    def finished(self, plan: dict[str, Any]) -> None:
        cooldown = plan.pop("cooldown", None)
        if cooldown:
            plan["cooldown_end"] = max(float(plan.get("cooldown_end") or 0), time.time() + float(cooldown))

    def limits(self, res: Res, props: Mapping[str, Any]) -> tuple[int, int, Any]:
        """min_size, max_size and cooldown of the group's properties as the template gives them."""
        return (*_bounds(res, props), props.get("cooldown"))

    async def adjust(self, txn: Txn, res: Res, row: ResourceRow, signal: Mapping[str, Any]) -> str:
        """Resize the group as a policy's *signal* asks; what was done, for the policy's event."""
        if row.status == "IN_PROGRESS":
            return f"no change: {row.name} is {row.action} IN_PROGRESS (scaling or updating)"
        plan = dict(row.attributes.get(STATE) or {})
        now = time.time()
        if plan.get("cooldown_end") and now < float(plan["cooldown_end"]):
            return f"no change: {row.name} is in its cooldown for {plan['cooldown_end'] - now:.0f} s more"
        low, high, own_cooldown = self.limits(res, row.properties or {})
        current = len(plan.get("members") or [])
        size = new_capacity(current, signal["adjustment"], signal["type"], signal.get("min_step"), low, high)
        if size == current:
            return f"no change: {row.name} stays at {current} (min_size {low}, max_size {high})"
        plan["target"] = {**plan["target"], "count": size}
        plan["batches"], plan["pause"] = [[size, size]], 0
        cooldown = signal.get("cooldown") if signal.get("cooldown") is not None else own_cooldown
        plan["cooldown"] = float(cooldown or 0)
        await self.next_batch(txn, res, row, plan)
        row.attributes = {**row.attributes, STATE: plan}
        row.action, row.status, row.updated_at = "UPDATE", "IN_PROGRESS", now
        row.status_reason = f"scaling from {current} to {size}"
        txn.event(
            res.stack.id, row.name, "UPDATE", "IN_PROGRESS", row.status_reason, traversal=res.stack.traversal
        )
        txn.kicks.add(res.stack.id)
        return f"{row.name} scaling from {current} to {size} members"


def _bounds(res: Res, props: Mapping[str, Any]) -> tuple[int, int]:
    low, high = int(props.get("min_size", 0)), int(props.get("max_size", 0))
    if low < 0 or high < low:
        raise BadRequestError(
            f"min_size {low} and max_size {high}: need 0 <= min_size <= max_size",
            where=f"{res.where}.properties",
        )
    desired = props.get("desired_capacity")
    if desired is not None and not low <= int(desired) <= high:
        raise BadRequestError(
            f"desired_capacity {desired} is not within min_size {low} .. max_size {high}",
            where=f"{res.where}.properties.desired_capacity",
        )
    return low, high


def _fresh() -> Iterator[str]:
    while True:
        yield nested.short_id()


class ScalingPolicy:
    """A policy: its URLs take a signal that adjusts its group."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        physical_id = nested.short_id()
        return done(physical_id, **urls(txn, res, physical_id))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return done(row.physical_id, **urls(txn, res, row.physical_id or ""))

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return done()

    async def signal(self, txn: Txn, res: Res, row: ResourceRow, details: Mapping[str, Any]) -> str:
        """Adjust the policy's group; what happened (also when nothing did)."""
        # An alarm service notifies every state change (Aodh's body: current, previous, reason);
        # as in Heat, only a signal saying "alarm" (or saying nothing) scales.
        state = str(details.get("current", details.get("state", "alarm")))
        if state.lower() != "alarm":
            return f"no change: the alarm's state is {state!r}, not 'alarm'"
        target, signal = self.terms(row.properties or {})
        group = await _group(txn, res, target, self.group_key, self.group_type)
        return await self.scaler.adjust(txn, Res(res.stack, group.name, group.type), group, signal)

    #: The property naming the group, the group's type and its handler.
    group_key, group_type = "auto_scaling_group_id", AUTO_SCALING_GROUP
    scaler: AutoScalingGroup = AutoScalingGroup()

    def terms(self, props: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The group the policy names and the adjustment a signal asks of it."""
        return str(props.get("auto_scaling_group_id") or ""), {
            "adjustment": float(props.get("scaling_adjustment", 0)),
            "type": str(props.get("adjustment_type") or "change_in_capacity"),
            "min_step": props.get("min_adjustment_step"),
            "cooldown": props.get("cooldown"),
        }


async def _group(txn: Txn, res: Res, target: str, key: str, group_type: str) -> ResourceRow:
    """The policy's group in its stack: named by its id (``get_resource``) or its name."""
    found = await txn.session.scalar(
        select(ResourceRow).where(
            ResourceRow.stack_id == res.stack.id,
            ResourceRow.current.is_(True),
            ResourceRow.type == group_type,
            or_(ResourceRow.physical_id == target, ResourceRow.name == target),
        )
    )
    if found is None:
        raise ConflictError(
            f"{key} {target!r} is no {group_type} of this stack", where=f"{res.where}.properties.{key}"
        )
    return found


def urls(txn: Txn, res: Res, physical_id: str) -> dict[str, str]:
    """The policy's signal URLs: each a capability for signalling this policy, dying with it."""
    sig = txn.runtime.keys.capability("resource", f"{res.stack.id}:{res.name}:{physical_id}")
    url = f"{txn.runtime.settings.base_url}/v1/resource-signal/{res.stack.id}/{res.name}?sig={sig}"
    return {"alarm_url": url, "signal_url": url}
