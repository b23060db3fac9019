"""Stacks and servers named by a caller: their names are unique per project (revision 0011).

The rule of where a name resolves is ``control/principal.py``'s Within: a caller's own
project, or for an admin the project it named and then every project when one alone has it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control.errors import ConflictError, NotFoundError
from control.principal import Within
from control.store.orm import ServerRow, StackRow

Named = TypeVar("Named", StackRow, ServerRow)
#: Projects an ambiguous name's 409 lists, at most.
SHOWN = 10


async def by_name(
    session: AsyncSession, cls: type[Named], name: str, within: Within, *options: Any
) -> Named | None:
    """The *cls* row called *name* where *within* resolves it, or None; an admin's name that several
    projects have (none of them the one it named) is a ConflictError naming them."""
    query = select(cls).where(cls.name == name).options(*options)
    if within.project is None and not within.admin:  # IDS_ONLY
        return None
    if within.project is not None:
        found = await session.scalar(query.where(cls.project == within.project))
        if found is not None or not within.admin:
            return found
    rows = list(await session.scalars(query.order_by(cls.project).limit(SHOWN + 1)))
    if len(rows) > 1:
        kind = cls.__tablename__.removesuffix("s")
        projects = ", ".join(r.project for r in rows[:SHOWN]) + (", ..." if len(rows) > SHOWN else "")
        raise ConflictError(
            f"{kind} name {name!r} is in several projects ({projects}): name the project "
            f"(?project=P, or Heat's path), or use the {kind}'s id",
            where="project",
        )
    return rows[0] if rows else None


async def taken(session: AsyncSession, cls: type[Named], name: str, project: str) -> bool:
    """Whether *project* has a *cls* row called *name* (another project's is no concern of a create)."""
    return await session.scalar(select(cls.id).where(cls.name == name, cls.project == project)) is not None


async def by_ref(
    session: AsyncSession, cls: type[Named], ref: str, within: Within, *options: Any
) -> Named | None:
    """The *cls* row named *ref* (as ``by_name``) or with id *ref* (visible under *within*), or None."""
    found = await by_name(session, cls, ref, within, *options)
    if found is None:
        found = await session.get(cls, ref, options=options)
        if found is not None and not within.holds(found.project):
            return None
    return found


async def find(session: AsyncSession, cls: type[Named], ref: str, within: Within, *options: Any) -> Named:
    """As ``by_ref``; NotFoundError naming the stack or server when there is none."""
    found = await by_ref(session, cls, ref, within, *options)
    if found is None:
        kind = cls.__tablename__.removesuffix("s")
        raise NotFoundError(f"{kind} {ref!r} not found", where=kind)
    return found
