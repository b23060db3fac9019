"""The web view's session cookie: granted for its lifetime, refused when forged, expired or made from another token."""

from __future__ import annotations

from control.api.ui import session

TOKEN = "admin-token-one"
NOW = 1_800_000_000.0


def test_a_minted_cookie_grants_its_role_until_it_expires() -> None:
    """The cookie names its role while it lasts and nothing from LIFETIME seconds on."""
    value = session.mint(TOKEN, session.ADMIN, NOW)
    assert session.ADMIN == session.role_of(value, TOKEN, NOW)
    assert session.ADMIN == session.role_of(value, TOKEN, NOW + session.LIFETIME - 1)
    assert session.role_of(value, TOKEN, NOW + session.LIFETIME) is None


def test_a_cookie_from_another_admin_token_is_refused() -> None:
    """A new admin token ends every session made with the old one."""
    assert session.role_of(session.mint(TOKEN, session.ADMIN, NOW), "admin-token-two", NOW) is None


def test_a_changed_role_expiry_or_mac_is_refused() -> None:
    """Any edit of the cookie (role, expiry, MAC) or a malformed value grants nothing."""
    role, expires, mac = session.mint(TOKEN, session.ADMIN, NOW).split(".")
    edits = [
        f"reader.{expires}.{mac}",
        f"{role}.{int(expires) + 3600}.{mac}",
        f"{role}.{expires}.{mac[:-1]}{'0' if mac[-1] != '0' else '1'}",
        f"{role}.{expires}",
        f"{role}.-5.{mac}",
        "",
        None,
    ]
    for value in edits:
        assert session.role_of(value, TOKEN, NOW) is None, value


def test_the_cookie_does_not_contain_the_token() -> None:
    """The cookie carries a MAC, never the token it was made from."""
    assert TOKEN not in session.mint(TOKEN, session.ADMIN, NOW)
