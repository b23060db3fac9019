"""Which project a row named in a request belongs to: a caller of another project is told it does not exist.

A row of another project answers exactly as a missing one does (404), so a member of one
project learns nothing of another's names.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from control.errors import NotFoundError
from control.principal import Within
from control.services import lookup, servers, stacks
from control.store.orm import ConfigRow

Kind = Literal["stack", "deployment", "server", "config"]


async def project_of(session: AsyncSession, kind: Kind, ref: str, project: str) -> str | None:
    """The project of the *kind* row *ref* names (as the routes resolve it), or None when there is none."""
    within = Within(project)  # a name of another project's row resolves to nothing here
    try:
        if kind == "stack":
            return (await stacks.get_stack(session, ref, *stacks.STATE_ONLY, within=within)).project
        if kind == "deployment":
            return (await lookup.find_deployment(session, ref, within)).project
        if kind == "server":
            return (await servers.get_server(session, ref, within=within)).project
    except NotFoundError:
        return None
    config = await session.get(ConfigRow, ref)
    return None if config is None else config.project


async def check(session: AsyncSession, kind: Kind, ref: str, project: str, message: str) -> None:
    """NotFoundError(*message*) unless the *kind* row *ref* is in *project*."""
    if await project_of(session, kind, ref, project) != project:
        raise NotFoundError(message, where=kind)
