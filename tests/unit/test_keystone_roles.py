"""Keystone's token body as Anneal's caller: roles mapped highest first, a project required below admin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control.errors import ForbiddenError, UnavailableError
from control.principal import Principal, Role
from control.services.keystone import expiry, principal_of
from control.settings import Settings, keystone_problem


def _token(*roles: str, project: str | None = "p-blue") -> dict[str, Any]:
    """A token body in the shape Keystone 30 answers GET /v3/auth/tokens with."""
    body: dict[str, Any] = {
        "user": {"id": "u1", "name": "alice", "domain": {"id": "default"}},
        "roles": [{"id": f"r-{r}", "name": r} for r in roles],
        "expires_at": "2026-11-26T14:06:45.000000Z",
    }
    if project is not None:
        body["project"] = {"id": project, "name": "blue", "domain": {"id": "default"}}
    return body


def test_admin_with_its_implied_roles_is_admin_of_every_project() -> None:
    """An admin's token lists admin, member, reader (Keystone's implied roles): Anneal's admin, no project."""
    found = principal_of(_token("reader", "member", "admin", "manager"))
    assert found == Principal(project=None, role="admin", who="keystone:alice")
    assert found.sees("any-project")


def test_member_and_reader_are_scoped_to_the_tokens_project() -> None:
    """member (and Keystone's old _member_) is a member of the token's project; reader reads it only."""
    cases: tuple[tuple[tuple[str, ...], Role], ...] = (
        (("member", "reader"), "member"),
        (("_member_",), "member"),
        (("reader",), "reader"),
    )
    for roles, role in cases:
        found = principal_of(_token(*roles))
        assert found == Principal(project="p-blue", role=role, who="keystone:alice")
        assert found.sees("p-blue") and not found.sees("p-green")


def test_a_token_without_a_mapped_role_or_project_is_refused_by_name() -> None:
    """Only a service role, or a member's token scoped to no project, is a 403 naming the Keystone user."""
    with pytest.raises(ForbiddenError, match="keystone:alice has none of the roles admin, member, reader"):
        principal_of(_token("service"))
    with pytest.raises(ForbiddenError, match="keystone:alice is not scoped to a project"):
        principal_of(_token("member", project=None))


def test_expiry_reads_keystones_timestamp_and_refuses_a_missing_one() -> None:
    """expires_at with microseconds and Z is epoch seconds; an answer without it is a 503, not a crash."""
    assert expiry(_token("member")) == 1795702005.0  # 2026-11-26T14:06:45Z
    with pytest.raises(UnavailableError, match="expires_at"):
        expiry({"expires_at": "soon"})


def test_keystone_options_are_checked_before_serving() -> None:
    """A Keystone URL needs an http(s) scheme and the service user's name and password; the cache is not negative."""
    base = Settings(data_dir=Path("/nonexistent"))
    assert keystone_problem(base) is None
    good = Settings(
        data_dir=Path("/x"), keystone_url="http://k:5000/v3", keystone_user="a", keystone_password="p"
    )
    assert keystone_problem(good) is None
    bad = [
        Settings(data_dir=Path("/x"), keystone_url="k:5000/v3", keystone_user="a", keystone_password="p"),
        Settings(data_dir=Path("/x"), keystone_url="http://k:5000/v3", keystone_user="a"),
        Settings(data_dir=Path("/x"), keystone_url="http://k:5000/v3", keystone_user="a", keystone_password="p",
                 keystone_cache=-1),
    ]  # fmt: skip
    problems = [keystone_problem(s) for s in bad]
    assert "expected Keystone's v3 URL" in str(problems[0])
    assert "ANNEAL_KEYSTONE_PASSWORD" in str(problems[1])
    assert "--keystone-cache" in str(problems[2])
