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

    def sees(self, project: str) -> bool:
        """Whether rows of *project* exist for this caller (others are answered as not found)."""
        return self.admin or project == self.project


#: The plug-in point for tokens that are not Anneal's (Keystone's, say): given the token, its
#: Principal, or None when the token is not valid there either.
TokenValidator = Callable[[str], Awaitable[Principal | None]]

#: What the admin token of the data dir resolves to.
ADMIN = Principal(project=None, role="admin", who="admin")
