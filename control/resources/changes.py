"""What an update does to one resource: the rules the engine acts on, shared with the plan of an update.

The engine (`engine/act.py`) and the plan (`services/plan.py`: `stack update --dry-run`,
Heat's update preview) decide with these functions and the handlers' ``replacement``,
so a plan says what the update will do, not what a second reading of the rules guesses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from control import hot
from control.hot.definition import plain
from control.resources import composite_for, handler_for
from control.resources.base import Replaces, Res
from control.resources.groups import GROUP_TYPES
from control.store.orm import ResourceRow
from control.txn import Txn

#: A plan's verdicts ("fail": the update would fail the resource, its properties do not resolve).
KINDS = ("create", "replace", "update", "unchanged", "delete", "fail")


@dataclass(frozen=True)
class Change:
    """One resource's verdict: *kind* (one of KINDS) and why."""

    kind: str
    reason: str = ""


def with_defaults(type_name: str, props: Any) -> Any:
    """Resolved properties with the type's defaults filled in, as they are stored and compared."""
    spec = hot.TYPES.get(type_name)
    if spec is None or not isinstance(props, dict):
        return props
    return plain(hot.apply_defaults(spec, props))


def with_stack_defaults(type_name: str, props: Any, defaults: Mapping[str, Any]) -> Any:
    """*props* with the environment's ``deployment_defaults`` for what the resource leaves unset.

    Stored with the properties, so a group's later batches and a plan see them too, and a
    changed default changes the deployments that take it, as a changed property would.
    """
    spec = hot.TYPES.get(type_name)
    if spec is None or not isinstance(props, dict) or not defaults:
        return props
    missing = {k: v for k, v in defaults.items() if k in spec.properties and props.get(k) is None}
    return {**props, **plain(missing)} if missing else props


def unchanged(res: Res, row: ResourceRow, props: Any) -> bool:
    """True when the resource is as its definition asks: nothing to do in this traversal.

    A row of another type (a registry entry changed) is replaced; a resource that makes a
    nested stack is compared on what it gives the nested stack too.
    """
    if row.type != res.type or row.status != "COMPLETE" or row.properties != props:
        return False
    composite = composite_for(res.type)
    return composite is None or not composite.changed(res, row, props)


def updates_in_place(res: Res, row: ResourceRow) -> bool:
    """Whether the engine asks the handler to update *row* (else it is replaced at once).

    A failed nested stack walks again in place: its own failed resources are replaced. A
    deployment group a rollback returns is updated in place too: only its members that ran
    the failed change run again (a failed canary's), the others are not touched.
    """
    if row.type != res.type:
        return False
    in_place = composite_for(res.type) is not None or (
        res.type in GROUP_TYPES and res.stack.action == "ROLLBACK"
    )
    return row.status != "FAILED" or in_place


async def change(txn: Txn, res: Res, row: ResourceRow | None, props: Any) -> Change:
    """What an update to *props* does to the resource now stored as *row* (None: none yet)."""
    if row is None:
        return Change("create")
    if unchanged(res, row, props):
        return Change("unchanged")
    if not updates_in_place(res, row):
        why = f"type {row.type} -> {res.type}" if row.type != res.type else f"{row.action} FAILED"
        return Change("replace", why)
    handler = handler_for(res.type)
    if isinstance(handler, Replaces):
        because = await handler.replacement(txn, res, row, props)
        if because is not None:
            return Change("replace", because)
    return Change("update", changed_keys(row.properties, props))


def changed_keys(old: Any, new: Any) -> str:
    """The properties that differ, named for a reason ("properties changed: a, b")."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return "properties changed"
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return f"properties changed: {', '.join(keys)}" if keys else "not COMPLETE: it runs again"
