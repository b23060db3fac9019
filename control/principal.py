"""Who a request acts for: a project, a role in it, and a name for the audit log.

Kernel (no imports of the stages): the API resolves a token into a Principal
(``control/api/principal.py``) and the services filter by its project.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

Role = Literal["admin", "member", "reader"]
ROLES: tuple[Role, ...] = ("admin", "member", "reader")
#: The project of every row made before projects existed, and of what the admin token makes
#: through the operator's API without naming one.
DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class Principal:
    """A caller: ``admin`` sees every project (``project`` None); ``member`` reads and writes its
    project; ``reader`` only reads it. ``who`` names it in the audit log; ``token_id`` is the
    stored token it came from (None for the admin token and external validators)."""

    project: str | None
    role: Role
    who: str
    token_id: str | None = None

    @property
    def admin(self) -> bool:
        return self.role == "admin"

    @property
    def can_write(self) -> bool:
        return self.role in ("admin", "member")

    def within(self, named: str | None = None) -> Within:
        """Where this caller's names resolve; *named*: the project it named (an admin's counts)."""
        return Within(named, admin=True) if self.admin else Within(self.project)

    def sees(self, project: str) -> bool:
        """Whether rows of *project* exist for this caller (others are answered as not found)."""
        return self.admin or project == self.project


#: The plug-in point for tokens that are not Anneal's (Keystone's, say): given the token, its
#: Principal, or None when the token is not valid there either.
TokenValidator = Callable[[str], Awaitable[Principal | None]]

#: What the admin token of the data dir resolves to.
ADMIN = Principal(project=None, role="admin", who="admin")


@dataclass(frozen=True)
class Within:
    """Where a stack or server name a caller gives resolves: names are unique per project.

    A member's or reader's names resolve in its ``project``, and its ids reach only that
    project's rows. An admin's name resolves in the project it named (``?project=``, Heat's
    path), if it has the name; otherwise across every project when one project alone has it,
    and is a 409 naming the projects when several do. An admin's ids reach every project.
    With neither a project nor the admin role (IDS_ONLY), no name resolves and every id does:
    a signed URL names its stack by id, and its signature is checked next.
    """

    project: str | None
    admin: bool = False

    def holds(self, project: str) -> bool:
        """Whether a row of *project*, found by its id, is visible here."""
        return self.admin or self.project in (None, project)


#: An admin that named no project.
EVERYWHERE = Within(None, admin=True)
IDS_ONLY = Within(None)
