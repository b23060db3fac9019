"""The web view's session cookie: the Principal and an expiry, signed with a key derived from the admin token.

Nothing is stored: a new admin token ends every session, and the cookie never holds the token
in clear. A session made from a stored token names it, so revoking the token ends the session
too (the middleware checks it on every request). A session made from an external token
(Keystone's) carries that token encrypted with the data key, and the middleware has it
validated again on every request (within the validator's cache), so revoking it in Keystone
ends the session too. Only the ``/ui/`` routes read the cookie; the
REST API takes bearer tokens alone, so a page on another site cannot make a browser call it
with this cookie (CSRF); the view's own forms carry ``form_token`` as well.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from control.principal import ROLES, Principal
from control.store import crypt

COOKIE = "anneal_ui"
#: The header a web view control sends its session's form token in.
FORM_HEADER = "X-Anneal-Form"
#: How long a login lasts, in seconds.
LIFETIME = 12 * 3600
#: Binds an encrypted external token to this use: no other encrypted value passes for one.
EXTERNAL_AAD = b"anneal-ui-external-token"


def seal_external(data_key: bytes, token: str) -> dict[str, str]:
    """An external token as a session carries it: readable only with the data key."""
    return crypt.encrypt(data_key, token, EXTERNAL_AAD)


def open_external(data_key: bytes, sealed: dict[str, str]) -> str | None:
    """The external token a session carries, or None when it does not open (another data key)."""
    try:
        token = crypt.decrypt(data_key, sealed, EXTERNAL_AAD)
    except (crypt.DataKeyError, KeyError, ValueError, TypeError):
        return None
    return token if isinstance(token, str) else None


def mint(admin_token: str, principal: Principal, now: float, external: dict[str, str] | None = None) -> str:
    """A cookie value for *principal*, valid LIFETIME seconds from *now*; *external*: its external
    token, encrypted (control/store/crypt.py)."""
    fields: list[Any] = [
        principal.project,
        principal.role,
        principal.who,
        principal.token_id,
        int(now) + LIFETIME,
    ]
    if external is not None:
        fields.append(external)
    payload = base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")
    return f"{payload}.{_mac(admin_token, payload)}"


def principal_of(value: str | None, admin_token: str, now: float) -> Principal | None:
    """The Principal a cookie value carries, or None when it is missing, forged, malformed or expired."""
    found = read(value, admin_token, now)
    return None if found is None else found[0]


def read(value: str | None, admin_token: str, now: float) -> tuple[Principal, dict[str, str] | None] | None:
    """(the Principal, its encrypted external token or None) a cookie value carries, or None as principal_of."""
    payload, _, mac = (value or "").partition(".")
    if not payload or not hmac.compare_digest(mac.encode(), _mac(admin_token, payload).encode()):
        return None
    try:
        project, role, who, token_id, expires, *rest = json.loads(base64.urlsafe_b64decode(payload + "=="))
    except (ValueError, TypeError, binascii.Error):
        return None
    if role not in ROLES or not isinstance(expires, int) or expires <= now:
        return None
    if not all(isinstance(v, str | None) for v in (project, token_id)):
        return None
    external = rest[0] if rest and isinstance(rest[0], dict) else None
    return Principal(project=project, role=role, who=str(who), token_id=token_id), external


def form_token(admin_token: str, cookie: str) -> str:
    """The per-session value a mutating form must carry: a page on another site cannot read it."""
    return _mac(admin_token, "form\0" + cookie)


def _mac(admin_token: str, payload: str) -> str:
    # A key of its own: a cookie's MAC says nothing that helps guess the token it was made from.
    key = hashlib.sha256(b"anneal-ui-session\0" + admin_token.encode()).digest()
    return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
