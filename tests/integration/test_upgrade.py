"""Upgrading the previous release's database (tests/fixtures/release_36f815b) on SQLite and PostgreSQL.

The fixture was made by release 36f815b's own code (tests/fixtures/make_release.py): its
SQLite database, data dir and two agents' state dirs, with a signal still in web-2's
outbox. On SQLite the test upgrades a copy of that database file. On PostgreSQL it runs
that release's DDL for PostgreSQL (what its `create_all` issued there) on an empty
database and copies every row of the SQLite file into it (tests/support/release.py),
then upgrades that. Either way `anneal serve` must refuse until `anneal db upgrade`, and
afterwards everything the release's API showed must still be there and still work.
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control import keys
from control.settings import async_url
from control.store import schema
from control.store.db import open_database
from tests.support import release
from tests.support.controlplane import ControlPlane, serve_once, start_control_plane, stop_control_plane
from tests.support.pg import Postgres
from tests.support.processes import BIN, command, stop_all
from tests.support.waiting import wait_until

DEPLOYMENT_FIELDS = (
    "name",
    "server_name",
    "status",
    "action",
    "generation",
    "output_values",
    "deploy_stdout",
    "deploy_stderr",
    "deploy_status_code",
)


@pytest.fixture(params=["sqlite", "postgresql"])
def old_database(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The previous release's data dir in tmp_path/data and its database; the `--db` arguments naming it."""
    release.data_dir(tmp_path / "data")
    if request.param == "sqlite":
        return []
    pg: Postgres = request.getfixturevalue("postgres")
    url = pg.new_database()
    asyncio.run(release.load_into_postgres(url))
    return ["--db", url]


def _anneal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [command("anneal"), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _database_url(tmp_path: Path, db_args: list[str]) -> str:
    return db_args[1] if db_args else f"sqlite:///{tmp_path / 'data' / 'anneal.db'}"


def test_serve_refuses_the_old_schema_with_the_upgrade_command_that_then_works(
    tmp_path: Path, old_database: list[str]
) -> None:
    """`anneal serve` refuses the old schema, printing the upgrade command; dry run changes nothing; the command upgrades."""
    data = ["--data-dir", str(tmp_path / "data"), *old_database]
    status = _anneal("db", "status", *data)
    assert 1 == status.returncode and f"{schema.BASELINE} (release 36f815b" in status.stdout, status
    refused = serve_once(tmp_path, *old_database)
    assert 2 == refused.returncode and "schema revision 0001" in refused.stderr, refused.stderr
    upgrade = shlex.split(refused.stderr.strip().splitlines()[-1])
    assert ["anneal", "db", "upgrade", *data] == upgrade
    dry = _anneal(*upgrade[1:], "--dry-run")
    assert 0 == dry.returncode and "UPDATE anneal_meta SET value='alembic'" in dry.stdout, dry
    assert 1 == _anneal("db", "status", *data).returncode
    done = _anneal(*upgrade[1:])
    assert 0 == done.returncode and f"now at revision {schema.head()}" in done.stdout, done
    assert [] == asyncio.run(release.differences(_database_url(tmp_path, old_database)))
    assert 0 == _anneal("db", "status", *data).returncode
    again = _anneal(*upgrade[1:])
    assert 0 == again.returncode and "nothing to do" in again.stdout


@pytest.fixture
def upgraded(tmp_path: Path, old_database: list[str]) -> Iterator[ControlPlane]:
    """A control plane of this tree on the upgraded database (agents enrol themselves: none started)."""
    done = _anneal("db", "upgrade", "--data-dir", str(tmp_path / "data"), *old_database)
    assert 0 == done.returncode, done.stderr
    cp = start_control_plane(tmp_path, *old_database, defaults=("--provisioner", "enrol"))
    yield cp
    stop_control_plane(cp)


def _deployments(cp: ControlPlane) -> dict[str, dict[str, Any]]:
    found = {}
    for stack in release.expected()["stacks"]:
        for summary in cp.api("GET", f"/v1/deployments?stack={stack}").body:
            shown = cp.api("GET", f"/v1/deployments/{summary['id']}").body
            found[summary["id"]] = {k: shown[k] for k in DEPLOYMENT_FIELDS}
    return found


def test_every_stack_deployment_and_server_survives_the_upgrade(upgraded: ControlPlane) -> None:
    """Stacks, outputs, deployments (status, outputs, stdout, stderr) and servers read as the release showed them."""
    cp, expected = upgraded, release.expected()
    assert expected["stacks"] == {s["name"]: s["status"] for s in cp.api("GET", "/v1/stacks").body}
    assert expected["outputs"] == {name: cp.outputs(name) for name in expected["stacks"]}
    assert {d["id"]: {k: d[k] for k in DEPLOYMENT_FIELDS} for d in expected["deployments"]} == _deployments(
        cp
    )
    servers = {s["name"]: {"id": s["id"], "status": s["status"]} for s in cp.api("GET", "/v1/servers").body}
    assert expected["servers"] == servers


def test_agents_credentials_keys_and_pending_signal_work_after_the_upgrade(
    tmp_path: Path, upgraded: ControlPlane
) -> None:
    """The release's agents run on: the queued signal completes its stack, nothing re-runs, updates deploy, web-3 enrols."""
    cp, expected = upgraded, release.expected()
    before = _deployments(cp)
    agents = [
        _run_agent(release.agent_state(name, tmp_path / "agents" / name, cp.url), tmp_path / f"{name}.log")
        for name in ("web-1", "web-2")
    ]
    try:
        cp.settled("pending", "CREATE_COMPLETE")
        pending = next(d for d in expected["deployments"] if d["stack"] == "pending")
        after = _deployments(cp)
        assert {"result": "late"} == after[pending["id"]]["output_values"]
        assert "finished while the control plane was down\n" == after[pending["id"]]["deploy_stdout"]
        assert {k: v for k, v in before.items() if k != pending["id"]} == {
            k: v for k, v in after.items() if k != pending["id"]
        }
        cp.update_stack("app", expected["templates"]["app"], {"message": "three"})
        assert {"said1": "three", "said2": "three"} == cp.outputs("app")
        enrol = subprocess.run(
            [
                str(BIN / "anneal-agent"),
                "enrol",
                "--url",
                cp.url,
                f"--token={expected['enrol_tokens']['web-3']}",
                "--state-dir",
                str(tmp_path / "agents" / "web-3"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert 0 == enrol.returncode, enrol.stderr
        wait_until(
            lambda: cp.api("GET", "/v1/servers/web-3").body["status"] == "ENROLLED", "web-3 enrolled", 30
        )
        alive = {s["name"]: s["agent"] for s in cp.api("GET", "/v1/servers").body}
        assert ("alive", "alive") == (alive["web-1"], alive["web-2"])
    finally:
        stop_all(agents)


def _run_agent(state: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(BIN / "anneal-agent"), "run", "--state-dir", str(state), "--poll-wait", "2"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_new_postgresql_database_is_made_at_the_newest_revision_and_matches_the_orm(
    tmp_path: Path, postgres: Postgres
) -> None:
    """On an empty PostgreSQL database every revision runs: it ends at head with exactly the ORM's tables."""
    url = postgres.new_database()
    asyncio.run(_open_and_close(async_url(url), tmp_path))
    assert schema.head() == asyncio.run(schema.status(async_url(url))).current
    assert [] == asyncio.run(release.differences(url))


async def _open_and_close(url: str, tmp_path: Path) -> None:
    engine, _ = await open_database(url, keys.load_or_create(tmp_path / "keys").data_key)
    await engine.dispose()
