"""Revision 0011 on SQLite and PostgreSQL: a database at 0010 with data keeps every row, and names become unique per project."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import sqlalchemy as sa
from alembic import command
from sqlalchemy.ext.asyncio import create_async_engine

from control.store import schema

NOW = 1_700_000_000.0
STACK = {
    "action": "CREATE", "status": "COMPLETE", "status_reason": "done", "template": {"resources": {}},
    "files": {}, "environment": {}, "params_given": {}, "parameters": {"p": "v"}, "hidden": [],
    "warnings": [], "version": 3, "traversal": 2, "rollback": False, "created_at": NOW, "updated_at": NOW,
    "row_version": 4, "parent_resource": "", "nested_depth": 0, "facade": {}, "outputs": {"o": 1},
    "tags": ["t"], "force_delete": False,
}  # fmt: skip
SERVER = {
    "status": "ENROLLED", "provisioner": "enrol", "public_keys": {"sign": "k"}, "serial": 7,
    "serial_at": NOW, "transport": "HTTP", "transport_previous": "", "created_at": NOW,
    "agent_status": {"version": "1"}, "agent_kind": "anneal", "rebuilds": [],
}  # fmt: skip


async def _run(url: str, work: Any) -> Any:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(work)
    finally:
        await engine.dispose()


def _to_0010_with_rows(conn: sa.Connection) -> dict[str, list[str]]:
    """Revisions up to 0010, then two projects' stacks (one nested), servers and a resource; the rows."""
    command.upgrade(schema.alembic_config(connection=conn), "0010")
    meta = sa.MetaData()
    stacks, servers, resources = (
        sa.Table(t, meta, autoload_with=conn) for t in ("stacks", "servers", "resources")
    )
    nested = {"parent_id": "s1", "nested_depth": 1}
    for row in (
        {**STACK, "id": "s1", "name": "web", "project": "alpha"},
        {**STACK, "id": "s2", "name": "db", "project": "beta", "handover": {"to": "http://b"}},
        {**STACK, "id": "s3", "name": "web-inner-x", "project": "alpha", **nested},
    ):
        conn.execute(stacks.insert(), row)
    for row in (
        {**SERVER, "id": "v1", "name": "web-0", "project": "alpha", "credential_hash": "h1"},
        {**SERVER, "id": "v2", "name": "db-0", "project": "beta", "owner_stack_id": "s2"},
    ):
        conn.execute(servers.insert(), row)
    conn.execute(
        resources.insert(),
        {"stack_id": "s1", "name": "box", "type": "OS::Heat::DeployedServer", "physical_id": "v1",
         "attributes": {}, "requires": [], "traversal": 2, "current": True, "created_at": NOW,
         "updated_at": NOW, "row_version": 1, "action": "CREATE", "status": "COMPLETE", "status_reason": ""},
    )  # fmt: skip
    return _rows(conn)


def _rows(conn: sa.Connection) -> dict[str, list[str]]:
    """Every row of the three tables, as comparable text."""
    found = {}
    for table in ("stacks", "servers", "resources"):
        rows = conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY id")).mappings()
        found[table] = [json.dumps({k: _plain(v) for k, v in r.items()}, sort_keys=True) for r in rows]
    return found


def _added(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, set[str]]:
    """Per table, the columns *after*'s rows have and *before*'s lack, each checked to be null in every row."""
    found = {}
    for table, rows in after.items():
        had = set(json.loads(before[table][0])) if before[table] else set()
        found[table] = {k for r in rows for k in json.loads(r)} - had
        assert all(json.loads(r)[k] is None for r in rows for k in found[table]), table
    return found


def _without(rows: dict[str, list[str]], columns: dict[str, set[str]]) -> dict[str, list[str]]:
    """*rows* (as ``_rows`` gives them) without each table's *columns*."""
    return {
        table: [
            json.dumps({k: v for k, v in json.loads(r).items() if k not in columns[table]}, sort_keys=True)
            for r in found
        ]
        for table, found in rows.items()
    }


def _plain(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value[:1] in ("{", "[") else value


def _add(conn: sa.Connection, table: str, row: dict[str, Any]) -> str:
    """Insert *row*; "ok", or the kind of the database's refusal."""
    try:
        with conn.begin_nested():
            conn.execute(sa.Table(table, sa.MetaData(), autoload_with=conn).insert(), row)
    except sa.exc.IntegrityError:
        return "refused"
    return "ok"


def test_a_database_at_0010_upgrades_with_every_row_and_names_unique_per_project(empty_db_url: str) -> None:
    """0010 -> 0011 keeps each stack, server and resource as it was; a name is then refused twice in one
    project only (another project may use it)."""
    before = asyncio.run(_run(empty_db_url, _to_0010_with_rows))
    found, _ = asyncio.run(schema.upgrade(empty_db_url))
    assert ("0010", schema.head()) == (found.current, found.head)
    after = asyncio.run(_run(empty_db_url, _rows))
    # Columns later revisions add (stacks.deadline in 0012, outline in 0013, previous_* in 0014) hold none yet.
    later = {
        "deadline",
        "outline",
        "previous_template",
        "previous_files",
        "previous_environment",
        "previous_params",
    }
    assert {"stacks": later} == {t: c for t, c in _added(before, after).items() if c}
    assert before == _without(after, _added(before, after))
    added = asyncio.run(
        _run(
            empty_db_url,
            lambda c: [
                _add(c, "stacks", {**STACK, "id": "s4", "name": "web", "project": "beta"}),
                _add(c, "stacks", {**STACK, "id": "s5", "name": "web", "project": "alpha"}),
                _add(c, "servers", {**SERVER, "id": "v3", "name": "web-0", "project": "beta"}),
                _add(c, "servers", {**SERVER, "id": "v4", "name": "web-0", "project": "alpha"}),
            ],
        )
    )
    assert ["ok", "refused", "ok", "refused"] == added
