"""Heat's update preview: the plan of an update (services/plan.py) in Heat's five categories.

Nothing is written. A resource the plan cannot judge (its properties fail to resolve, so
the update would fail it) is listed as updated, as Heat lists a resource it cannot compare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from control.runtime import Runtime
from control.services.plan import plan_update
from control.services.stack_resources import identified_stack
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
