"""API tokens with a project and a role: made, listed, revoked, and looked up on each request.

The database is the truth and is read on every request that brings a token (one indexed
SELECT of the token's hash): a revocation committed by any process is refused by every
process from its next request on, with no cache to wait out. Only the hash is stored.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from sqlalchemy import select

from control.errors import BadRequestError, NotFoundError
from control.keys import new_token, token_hash
from control.principal import ROLES, Principal
from control.runtime import Runtime
from control.store.orm import TokenRow

#: A project's name: what Keystone's project ids and names look like (letters, digits, - _ .).
PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
NAME_CAP = 255


def check_request(body: dict[str, Any]) -> tuple[str | None, str, str, float | None]:
    """The (project, role, name, expires seconds) a create request asks for; a 400 naming what is wrong."""
    unknown = sorted(set(body) - {"role", "project", "name", "expires"})
    if unknown:
        raise BadRequestError(
            f"{unknown[0]}: not a field of a token (role, project, name, expires)", where=unknown[0]
        )
    role = body.get("role")
    if role not in ROLES:
        raise BadRequestError(f"role: expected one of {', '.join(ROLES)}, got {role!r}", where="role")
    project = body.get("project")
    if role == "admin" and "project" in body:
        raise BadRequestError("project: an admin token is for every project; give none", where="project")
    if role != "admin" and not (isinstance(project, str) and PROJECT.fullmatch(project)):
        raise BadRequestError(
            "project: a member or reader token needs a project (letters, digits, '.', '_', '-')",
            where="project",
        )
    name = body.get("name", "")
    if not isinstance(name, str) or len(name) > NAME_CAP:
        raise BadRequestError(f"name: expected text of at most {NAME_CAP} characters", where="name")
    expires = body.get("expires")
    if "expires" in body and (  # absent: never expires; given, even null, it must be seconds
        not isinstance(expires, int | float) or isinstance(expires, bool) or expires <= 0
    ):
        raise BadRequestError("expires: expected a number of seconds above 0", where="expires")
    return project, role, name, None if expires is None else float(expires)


async def create(rt: Runtime, body: dict[str, Any]) -> dict[str, Any]:
    """A new token; the answer is the only place its value is ever shown."""
    project, role, name, expires = check_request(body)
    token, now = new_token(), time.time()
    row = TokenRow(
        id=uuid.uuid4().hex[:16],
        name=name,
        project=project,
        role=role,
        hash=token_hash(token),
        created_at=now,
        expires_at=None if expires is None else now + expires,
    )
    async with rt.sessions() as session:
        session.add(row)
        await session.commit()
        return {**view(row), "token": token}


async def list_tokens(rt: Runtime) -> list[dict[str, Any]]:
    async with rt.sessions() as session:
        return [view(r) for r in await session.scalars(select(TokenRow).order_by(TokenRow.created_at))]


async def revoke(rt: Runtime, token_id: str) -> dict[str, Any]:
    """Revoke a token: refused by every process from its next request on (revoking twice changes nothing)."""
    async with rt.sessions() as session:
        row = await session.get(TokenRow, token_id)
        if row is None:
            raise NotFoundError(f"no token {token_id!r}", where="id")
        if row.revoked_at is None:
            row.revoked_at = time.time()
            await session.commit()
        return view(row)


async def principal_of(rt: Runtime, token: str) -> Principal | None:
    """The Principal of a stored token that is neither revoked nor expired, else None."""
    async with rt.sessions() as session:
        row = await session.scalar(select(TokenRow).where(TokenRow.hash == token_hash(token)))
    return principal_of_row(row)


async def still_valid(rt: Runtime, token_id: str) -> bool:
    """Whether the stored token *token_id* is neither revoked nor expired (a web view session made from it)."""
    async with rt.sessions() as session:
        return principal_of_row(await session.get(TokenRow, token_id)) is not None


def principal_of_row(row: TokenRow | None) -> Principal | None:
    if (
        row is None
        or row.revoked_at is not None
        or (row.expires_at is not None and row.expires_at <= time.time())
    ):
        return None
    who = f"token {row.id}" + (f" ({row.name})" if row.name else "")
    return Principal(project=row.project, role=row.role, who=who, token_id=row.id)  # type: ignore[arg-type]


def view(row: TokenRow) -> dict[str, Any]:
    """What list and create show of a token: never its value or its hash."""
    return {
        "id": row.id,
        "name": row.name,
        "project": row.project,
        "role": row.role,
        "created_at": row.created_at,
        "expires_at": row.expires_at,
        "revoked_at": row.revoked_at,
    }
