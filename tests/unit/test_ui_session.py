"""The web view's session cookie: granted for its lifetime, refused when forged, expired or made from another token."""

from __future__ import annotations

import base64
import json

from control.api.ui import session
from control.principal import ADMIN, Principal

TOKEN = "admin-token-one"
NOW = 1_800_000_000.0
READER = Principal(project="alpha", role="reader", who="token ops-ro", token_id="tok1")


def test_a_minted_cookie_carries_its_principal_until_it_expires() -> None:
    """The cookie gives back its Principal while it lasts and nothing from LIFETIME seconds on."""
    for principal in (ADMIN, READER):
        value = session.mint(TOKEN, principal, NOW)
        assert principal == session.principal_of(value, TOKEN, NOW)
        assert principal == session.principal_of(value, TOKEN, NOW + session.LIFETIME - 1)
        assert session.principal_of(value, TOKEN, NOW + session.LIFETIME) is None


def test_a_new_admin_token_ends_every_session() -> None:
    """A new admin token ends every session made with the old one."""
    assert session.principal_of(session.mint(TOKEN, ADMIN, NOW), "admin-token-two", NOW) is None


def test_a_changed_role_expiry_or_mac_is_refused() -> None:
    """Any edit of the cookie (role, expiry, MAC) or a malformed value grants nothing."""
    payload, mac = session.mint(TOKEN, READER, NOW).split(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=="))
    promoted = base64.urlsafe_b64encode(json.dumps([fields[0], "admin", *fields[2:]]).encode()).decode()
    edits = [
        f"{promoted.rstrip('=')}.{mac}",
        f"{payload}.{mac[:-1]}{'0' if mac[-1] != '0' else '1'}",
        payload,
        f"!!.{mac}",
        "",
        None,
    ]
    for value in edits:
        assert session.principal_of(value, TOKEN, NOW) is None, value


def test_the_cookie_does_not_contain_the_token() -> None:
    """The cookie carries a MAC, never the token it was made from."""
    assert TOKEN not in session.mint(TOKEN, ADMIN, NOW)


def test_the_form_token_is_the_sessions_own() -> None:
    """Two sessions get two form tokens, and the form token differs from the cookie's MAC."""
    one, two = session.mint(TOKEN, ADMIN, NOW), session.mint(TOKEN, READER, NOW)
    assert session.form_token(TOKEN, one) != session.form_token(TOKEN, two)
    assert session.form_token(TOKEN, one) not in one


def test_an_external_token_rides_encrypted_and_opens_only_with_the_data_key() -> None:
    """A Keystone session's cookie carries its token sealed: not in the cookie's text, opened by the data key alone."""
    data_key, other_key = bytes(range(32)), bytes(32)
    external = session.seal_external(data_key, "gAAAAA-keystone-token")
    value = session.mint(TOKEN, READER, NOW, external)
    assert "gAAAAA-keystone-token" not in value
    found = session.read(value, TOKEN, NOW)
    assert found is not None and found[0] == READER and found[1] is not None
    assert session.open_external(data_key, found[1]) == "gAAAAA-keystone-token"
    assert session.open_external(other_key, found[1]) is None
    plain = session.read(session.mint(TOKEN, READER, NOW), TOKEN, NOW)
    assert plain is not None and plain[1] is None
