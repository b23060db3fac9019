"""How an operator names a deployment: its id, a unique prefix of it, or ``stack/resource``.

Resolved here, in the operator API, so every client (the CLI, scripts, the web view) reads
the same answer; Heat's API keeps Heat's rule (whole ids only) for Heat's clients.
"""

from __future__ import annotations

from sqlalchemy import select, true
from sqlalchemy.ext.asyncio import AsyncSession

from control.errors import BadRequestError, NotFoundError
from control.principal import Within
from control.services.stacks import STATE_ONLY, get_stack
from control.store.orm import DeploymentRow, ResourceRow

#: Candidates an ambiguous prefix names in its error, at most.
SHOWN = 10


async def find_deployment(session: AsyncSession, ref: str, within: Within) -> DeploymentRow:
    """The deployment *ref* names, as *within* sees them (a prefix: among its project's, an admin's:
    among all); NotFoundError if none, BadRequestError (listing them) if several."""
    dep = await session.get(DeploymentRow, ref)
    if dep is not None and within.holds(dep.project):
        return dep
    if "/" in ref:
        return await _by_resource(session, ref, within)
    project = None if within.admin else within.project
    if not ref:
        raise BadRequestError("deployment: give an id, a unique id prefix or stack/resource", where="id")
    ids = list(
        await session.scalars(
            select(DeploymentRow.id)
            .where(DeploymentRow.id.startswith(ref, autoescape=True))
            .where(DeploymentRow.project == project if project is not None else true())
            .order_by(DeploymentRow.id)
            .limit(SHOWN + 1)
        )
    )
    if not ids:
        raise NotFoundError(f"deployment {ref!r} not found (no id starts with it)", where="deployment")
    if len(ids) > 1:
        more = ", ..." if len(ids) > SHOWN else ""
        raise BadRequestError(
            f"deployment id prefix {ref!r} is ambiguous: it matches {', '.join(ids[:SHOWN])}{more}",
            where="id",
        )
    found = await session.get(DeploymentRow, ids[0])
    assert found is not None
    return found


async def _by_resource(session: AsyncSession, ref: str, within: Within) -> DeploymentRow:
    """``stack/resource``: the deployment the stack's current resource of that name made."""
    stack_ref, resource = ref.split("/", 1)
    stack = await get_stack(session, stack_ref, *STATE_ONLY, within=within)
    physical = await session.scalar(
        select(ResourceRow.physical_id).where(
            ResourceRow.stack_id == stack.id, ResourceRow.name == resource, ResourceRow.current.is_(True)
        )
    )
    dep = await session.get(DeploymentRow, physical) if physical else None
    if dep is None:
        raise NotFoundError(
            f"stack {stack.name} has no deployment resource named {resource!r}", where="deployment"
        )
    return dep
