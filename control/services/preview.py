"""Heat's previews: of an update, the plan (services/plan.py) in Heat's five categories; of a create
(`stack create --dry-run`), the checked definition and the resources it would make.

Nothing is written. A resource the plan cannot judge (its properties fail to resolve, so
the update would fail it) is listed as updated, as Heat lists a resource it cannot compare.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from control import hot
from control.engine.stackdef import Definition
from control.errors import ConflictError
from control.hot import taint
from control.resources.validate import DryContext
from control.runtime import Runtime
from control.services.plan import plan_update
from control.services.stack_request import (
    dry_values,
    parse_request,
    rollback_wanted,
    tags_given,
    timeout_given,
    validated_request,
)
from control.services.stack_resources import identified_stack
from control.services.stacks import MASK, check_stack_name
from control.settings import Settings
from control.store import names
from control.store.orm import StackRow

CATEGORIES = ("added", "deleted", "replaced", "updated", "unchanged")
#: The plan's verdicts in Heat's words.
HEAT_CATEGORY = {
    "create": "added",
    "delete": "deleted",
    "replace": "replaced",
    "update": "updated",
    "fail": "updated",
    "unchanged": "unchanged",
}


async def preview_update(
    rt: Runtime, stack_name: str, stack_id: str, body: Mapping[str, Any]
) -> dict[str, list[Any]]:
    """Each of Heat's categories with the resources (``{name, type, row}``) that would fall in it."""

    async def find(session: AsyncSession) -> StackRow:
        return await identified_stack(session, stack_name, stack_id)

    plan = await plan_update(rt, body, find)
    found: dict[str, list[Any]] = {c: [] for c in CATEGORIES}
    for entry in plan.entries:
        found[HEAT_CATEGORY[entry.change.kind]].append(
            {"name": entry.name, "type": entry.type, "row": entry.row}
        )
    return found


async def preview_create(rt: Runtime, body: Mapping[str, Any], project: str) -> dict[str, Any]:
    """What creating stack ``body["name"]`` would make, checked as a create checks it (400
    naming the path; 409 for a name *project* uses): its parameters (hidden ones masked) and each resource in
    creation order with its type, template properties, metadata and the resources requiring it; the
    stack's tags, timeout_mins and rollback."""
    name = check_stack_name(body.get("name"))
    req = parse_request(body, rt.settings.max_template_bytes)
    options = {
        "tags": tags_given(body) or [],
        "timeout_mins": timeout_given(body),
        "rollback": rollback_wanted(body),
    }
    nesting = hot.Nesting(0, rt.settings.max_nested_depth)
    defn, _ = await validated_request(rt.settings, req, stack_name=name, stack_id="None", nesting=nesting)
    async with rt.sessions() as session:
        if await names.taken(session, StackRow, name, project):
            raise ConflictError(f"stack {name!r} already exists", where="name")
    hidden = defn.params.hidden
    order = defn.order()
    properties = await asyncio.to_thread(_resolved, rt.settings, defn, (name, project), req.files)
    resources = []
    for res_name in order:
        rdef = defn.template.resources[res_name]
        resources.append(
            {
                "name": res_name,
                "type": rdef.type,
                "properties": properties[res_name],
                "metadata": dict(rdef.metadata),
                "required_by": [n for n in order if res_name in defn.requires(n)],
            }
        )
    return {
        **options,
        "name": name,
        "description": str(defn.template.description or ""),
        "parameters": {k: MASK if k in hidden else v for k, v in defn.params.values.items()},
        "resources": resources,
    }


class _Unmade(DryContext):
    """What a preview's functions see: Heat's answers for resources not made yet (a reference is
    the resource's name, an attribute null)."""

    def resource_id(self, name: str) -> Any:
        return name


def _resolved(
    settings: Settings, defn: Definition, where: tuple[str, str], files: Mapping[str, Any]
) -> dict[str, Any]:
    """Each resource's properties as Heat's preview shows them: resolved where the parameters decide
    them, a value derived from a hidden one masked, and as the template writes them where a call
    cannot be evaluated before the resources exist. *where* is the stack's name and project."""
    ctx = _Unmade(dry_values(defn, where[0], "None", where[1]), defn.conditions, files)
    found: dict[str, Any] = {}
    with hot.evaluating(hot.Budget(settings.evaluation_cap)) as budget, budget.leniently():
        for res_name, rdef in defn.template.resources.items():
            try:
                value = hot.resolve(rdef.properties, ctx, f"resources.{res_name}.properties")
            except hot.TemplateError:
                value = rdef.properties
            found[res_name] = taint.masked(value) if isinstance(value, Mapping) else {}
    return found
