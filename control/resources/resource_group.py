"""OS::Heat::ResourceGroup: ``count`` members of one definition, in a nested stack of their own.

As in Heat, the members are the resources ``0``, ``1``, ... of a nested stack whose
template the group writes: ``resource_def`` with ``index_var`` (``%index%``) replaced by
the member's name, and outputs for what the parent reads of the group (``refs_map``
always; for each ``get_attr`` path the parent's template has, an output evaluated inside
the nested stack). Scaling down removes the highest names; ``removal_policies`` name
members to remove first, and a removed name is never used again (``removal_policies_mode:
update`` forgets the earlier ones). With ``rolling_update`` a changed definition reaches
the members in batches (``max_batch_size``, ``min_in_service``, ``pause_time``), one
nested-stack update per batch; ``batch_create`` creates them in batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control import hot
from control.errors import BadRequestError
from control.hot.groups import substituted
from control.resources import batches, canary
from control.resources.base import Res
from control.resources.group_stack import ORDER, STATE, GroupStack, definition, wants
from control.resources.provider import hidden_output
from control.store.orm import ResourceRow

RESOURCE_GROUP = "OS::Heat::ResourceGroup"
_OWN = frozenset({"refs", "refs_map", "removed_rsrc_list", "attributes"})


def read(attributes: Mapping[str, Any], name: str, path: list[Any]) -> Any:
    """``get_attr: [group, name, *path]``: refs, refs_map, attributes, resource.<n>[.<attr>], or
    any member attribute as a list in member order."""
    order = list(attributes.get(ORDER) or [])
    refs = attributes.get("refs_map") or {}
    if name == "refs":
        return hot.select([refs.get(n) for n in order], path)
    if name in ("refs_map", "removed_rsrc_list"):
        return hot.select(attributes.get(name), path)
    if name.startswith("resource.") and name.count(".") == 1:
        return hot.select(refs.get(name.split(".", 1)[1]), path)
    found = attributes.get(hidden_output([name, *path]))
    if name == "attributes" or name.startswith("resource."):
        return found
    return [found.get(n) for n in order] if isinstance(found, Mapping) else None


def outputs(names: list[str], wants: list[list[Any]] | None) -> dict[str, Any]:
    """The nested template's outputs: ``refs_map``, and one per attribute path the parent reads."""
    out: dict[str, Any] = {"refs_map": {"value": {n: {"get_resource": n} for n in names}}}
    for path in wants or ():
        key = path[0] if path else None
        if not isinstance(key, str) or key in _OWN - {"attributes"}:
            continue
        if key.startswith("resource."):
            parts = key.split(".", 2)
            if len(parts) < 3 or parts[1] not in names:
                continue
            value: Any = {"get_attr": [parts[1], parts[2], *path[1:]]}
        elif key == "attributes":
            if len(path) < 2 or not isinstance(path[1], str):
                continue
            value = {n: {"get_attr": [n, *path[1:]]} for n in names}
        else:
            value = {n: {"get_attr": [n, key, *path[1:]]} for n in names}
        out[hidden_output(path)] = {"value": value}
    return out


def member(definition: Mapping[str, Any], index_var: str, name: str) -> dict[str, Any]:
    """Member *name*'s definition: ``index_var`` replaced by its name in every string property."""
    props = substituted(definition.get("properties") or {}, index_var, name)
    return {
        "type": definition["type"],
        "properties": {k: v for k, v in props.items() if v is not None},
        "metadata": dict(definition.get("metadata") or {}),
    }


def policy(res: Res, name: str) -> dict[str, Any] | None:
    """``update_policy.<name>`` with Heat's defaults (batches of 1, nobody kept, no pause), or None."""
    given = res.update_policy.get(name)
    if given is None:
        return None
    where = f"{res.where}.update_policy.{name}"
    try:
        size = int(given.get("max_batch_size", 1))
        keep = int(given.get("min_in_service", 0))
        pause = float(given.get("pause_time", 0))
    except (TypeError, ValueError):
        raise BadRequestError(
            "max_batch_size, min_in_service and pause_time must be numbers", where=where
        ) from None
    if size < 1 or keep < 0 or not 0 <= pause <= 3600:
        raise BadRequestError(
            "max_batch_size must be at least 1, min_in_service not negative, pause_time 0 to 3600 s",
            where=where,
        )
    return {"max_batch_size": size, "min_in_service": keep, "pause_time": pause}


def removed_names(
    props: Mapping[str, Any], before: set[str], existing: set[str], refs: Mapping[str, Any], created: bool
) -> set[str]:
    """The names never to use again: the earlier ones (unless mode ``update``) and those the
    removal policies list, by name or by reference (a member's id)."""
    found = set() if props.get("removal_policies_mode") == "update" else set(before)
    by_ref = {str(v): k for k, v in refs.items()}
    for entry in props.get("removal_policies") or []:
        for item in (entry or {}).get("resource_list") or []:
            text = str(item)
            if text in before or not created or text in existing:
                found.add(text)
            elif text in by_ref:
                found.add(by_ref[text])
    return found


class ResourceGroup(GroupStack):
    """Members named 0, 1, ...; scaling down removes the highest names."""

    def plan(
        self, res: Res, props: Mapping[str, Any], row: ResourceRow | None, old: Mapping[str, Any]
    ) -> dict[str, Any]:
        before = dict(row.attributes.get(STATE) or {}) if row is not None else {}
        refs = row.attributes.get("refs_map") or {} if row is not None else {}
        removed = removed_names(
            props, set(before.get("removed") or ()), set(old), refs, created=row is not None
        )
        count = int(props.get("count", 1))
        if count < 0:
            raise BadRequestError(f"count: {count} is negative", where=f"{res.where}.properties.count")
        plan: dict[str, Any] = {
            "target": {
                "definition": definition(res, props, "resource_def"),
                "index_var": str(props.get("index_var") or "%index%"),
                "count": count,
            },
            "removed": sorted(removed),
            "batches": [[count, count]],
            "pause": 0,
            "pause_until": None,
            "wants": wants(res),
        }
        if row is None:
            given = policy(res, "batch_create")
            if given is not None and count:
                plan["batches"] = batches.batches(count, 0, given["max_batch_size"], 0)
                plan["pause"] = given["pause_time"]
            return plan
        if (before.get("target") or {}).get("definition") == plan["target"]["definition"]:
            return plan
        given = policy(res, "rolling_update")
        # Every member gets the new definition, so the canary is a share of count.
        test = canary.policy(res, count)
        if given is not None or test is not None:
            current = len([n for n in old if n not in removed])
            size, keep = (given["max_batch_size"], given["min_in_service"]) if given else (count, 0)
            first = test["size"] if test else None
            plan["batches"] = batches.batches(count, current, size, keep, first) or plan["batches"]
            plan["pause"] = given["pause_time"] if given else 0
            plan["canary"] = test
        return plan

    def resources(
        self, plan: dict[str, Any], old: Mapping[str, Any], size: int, changes: int
    ) -> dict[str, Any]:
        target, removed = plan["target"], set(plan["removed"])
        count = int(target["count"])
        names = batches.names(size, removed)
        valid = {n: d for n, d in old.items() if n not in removed}

        def priority(name: str) -> int:
            if name not in names:
                return 0  # removed, or beyond the batch's size: goes first
            index = names.index(name)
            return count - index if index < count else size  # higher indexes change first

        ordered = dict(sorted(valid.items(), key=lambda item: priority(item[0])))
        fresh = iter([n for n in names if n not in valid])

        def new(name: str) -> dict[str, Any]:
            return member(target["definition"], target["index_var"], name)

        return batches.members(ordered, new, names, size, changes, fresh)

    def outputs(self, names: list[str], paths: list[list[Any]] | None) -> dict[str, Any]:
        return outputs(names, paths)

    def attributes(self, out: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
        names = batches.names(int(plan["target"]["count"]), set(plan["removed"]))
        return {
            ORDER: [n for n in names if n in (out.get("refs_map") or {})],
            "removed_rsrc_list": sorted(plan["removed"]),
        }
