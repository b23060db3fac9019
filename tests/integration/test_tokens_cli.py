"""`anneal token` and `anneal audit` against two real `anneal serve` processes sharing one database and data dir."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, two_planes
from tests.support.processes import command


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[tuple[ControlPlane, ControlPlane]]:
    """Two processes on one SQLite database and one data dir (keys, admin token)."""
    with two_planes(tmp_path, "--provisioner", "enrol") as (a, b):
        yield a, b


def anneal(cp: ControlPlane, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `anneal` against *cp* with *token*."""
    env = {**cp.env(), "ANNEAL_TOKEN": token}
    return subprocess.run(
        [command("anneal"), *args], env=env, text=True, capture_output=True, timeout=120, check=False
    )


def made_token(cp: ControlPlane, *args: str) -> tuple[str, str]:
    """`anneal token create ARGS` with the admin token: the token's id and its value (printed once)."""
    done = anneal(cp, cp.token, "token", "create", *args)
    assert 0 == done.returncode, done.stderr
    lines = done.stdout.strip().splitlines()
    assert 2 == len(lines) and "shown this once" in lines[0], done.stdout
    return lines[0].split()[1], lines[1]


def test_tokens_act_in_their_project_by_role_and_a_revocation_holds_on_every_process(
    planes: tuple[ControlPlane, ControlPlane],
) -> None:
    """A member changes its project, a reader only reads it, a revoked token is refused by the other
    process at once, and the audit log names who did what with which result."""
    a, b = planes
    member_id, member = made_token(a, "--project", "alpha", "--role", "member", "--name", "ops")
    _, reader = made_token(a, "--project", "alpha", "--role", "reader", "--expires", "1h")
    created = anneal(b, member, "server", "create", "web1")
    assert 0 == created.returncode, created.stderr
    refused = anneal(b, reader, "server", "create", "web2")
    assert 1 == refused.returncode and "needs the member or admin role" in refused.stderr, refused
    # written before the refusal's answer lingers: an auditor reading at once finds it
    newest = a.api("GET", "/v1/audit?limit=1").body[-1]
    assert ("POST", "/v1/servers", 403) == (newest["method"], newest["route"], newest["status"]), newest
    listed = anneal(b, reader, "server", "list", "-f", "json")
    assert ["web1"] == [s["name"] for s in json.loads(listed.stdout)]

    tokens = json.loads(anneal(a, a.token, "token", "list", "-f", "json").stdout)
    assert [("ops", "alpha", "member"), ("", "alpha", "reader")] == [
        (t["name"], t["project"], t["role"]) for t in tokens
    ]
    assert all("token" not in t and member not in json.dumps(t) for t in tokens)
    assert member not in (a.data_dir / "anneal.db").read_bytes().decode("latin-1")  # stored hashed

    revoked = anneal(a, a.token, "token", "revoke", member_id)
    assert 0 == revoked.returncode and f"token {member_id} revoked" in revoked.stdout
    after = anneal(b, member, "server", "list")
    assert 1 == after.returncode and "401" in after.stderr, after

    rows = json.loads(anneal(a, a.token, "audit", "-f", "json").stdout)
    seen = [(r["who"].split(" (")[0].split()[0], r["method"], r["route"], r["status"]) for r in rows]
    assert ("admin", "POST", "/v1/tokens", 201) in seen
    assert ("token", "POST", "/v1/servers", 201) in seen
    assert ("token", "POST", "/v1/servers", 403) in seen
    assert ("admin", "DELETE", "/v1/tokens/{id}", 200) in seen
    assert all(r["method"] != "GET" for r in rows)
    member_row = next(r for r in rows if r["status"] == 201 and r["route"] == "/v1/servers")
    assert f"token {member_id} (ops)" == member_row["who"] and "alpha" == member_row["project"]
    newest = json.loads(anneal(a, a.token, "audit", "--since", "1h", "--limit", "2", "-f", "json").stdout)
    assert rows[-2:] == newest
