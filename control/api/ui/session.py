"""The web view's session cookie: a role and an expiry, signed with a key derived from the admin token.

Nothing is stored: a new admin token ends every session, and the cookie never holds the token
itself. Only the ``/ui/`` routes read it; the REST API takes bearer tokens alone, so a page
on another site cannot make a browser call it with this cookie (CSRF).
"""

from __future__ import annotations

import hashlib
import hmac

COOKIE = "anneal_ui"
#: How long a login lasts, in seconds.
LIFETIME = 12 * 3600
#: The one role tokens have today: the operator's admin token.
ADMIN = "admin"


def mint(admin_token: str, role: str, now: float) -> str:
    """A cookie value for *role*, valid LIFETIME seconds from *now*."""
    expires = int(now) + LIFETIME
    return f"{role}.{expires}.{_mac(admin_token, role, expires)}"


def role_of(value: str | None, admin_token: str, now: float) -> str | None:
    """The role a cookie value grants, or None when it is missing, forged, malformed or expired."""
    role, _, rest = (value or "").partition(".")
    expires, _, mac = rest.partition(".")
    if not role or not expires.isdigit() or int(expires) <= now:
        return None
    return role if hmac.compare_digest(mac.encode(), _mac(admin_token, role, int(expires)).encode()) else None


def _mac(admin_token: str, role: str, expires: int) -> str:
    # A key of its own: a cookie's MAC says nothing that helps guess the token it was made from.
    key = hashlib.sha256(b"anneal-ui-session\0" + admin_token.encode()).digest()
    return hmac.new(key, f"{role}|{expires}".encode(), hashlib.sha256).hexdigest()
