"""The schema's revisions on SQLite: new databases at head, older ones refused until upgraded, upgrades whole or not at all."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from control.settings import async_url
from control.store import schema
from control.store.db import open_database
from tests.support import release


def _url(path: Path) -> str:
    return async_url(f"sqlite:///{path}")


def _old_database(tmp_path: Path) -> Path:
    """A copy of the previous release's database."""
    path = tmp_path / "anneal.db"
    shutil.copy(release.FIXTURE / "data" / "anneal.db", path)
    return path


def _query(path: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


async def test_new_database_is_made_at_the_newest_revision_and_matches_the_orm(tmp_path: Path) -> None:
    """A new database runs every revision: it ends at head, with exactly the ORM's tables and indexes."""
    engine, _ = await open_database(_url(tmp_path / "new.db"), os.urandom(32))
    await engine.dispose()
    assert schema.Version(schema.head(), schema.head()) == await schema.status(_url(tmp_path / "new.db"))
    assert [] == await release.differences(f"sqlite:///{tmp_path / 'new.db'}")
    assert [("schema_version", "alembic")] == _query(
        tmp_path / "new.db", "SELECT key, value FROM anneal_meta"
    )


async def test_previous_release_database_is_refused_until_upgraded(tmp_path: Path) -> None:
    """The previous release's database is refused, untouched, as upgradable; after the upgrade it opens."""
    path = _old_database(tmp_path)
    before = path.read_bytes()
    with pytest.raises(schema.SchemaError, match="schema revision 0001; this control plane needs") as refused:
        await open_database(_url(path), os.urandom(32))
    assert refused.value.upgradable
    assert before == path.read_bytes()
    found, sql = await schema.upgrade(_url(path))
    assert (found.current, found.legacy, sql) == (schema.BASELINE, True, "")
    assert schema.head() == (await schema.status(_url(path))).current
    assert [] == await release.differences(f"sqlite:///{path}")
    engine, _ = await open_database(_url(path), os.urandom(32))
    await engine.dispose()


async def test_dry_run_prints_the_upgrade_sql_and_changes_nothing(tmp_path: Path) -> None:
    """--dry-run's SQL makes the version table, stamps the baseline and applies each revision; the file is unchanged."""
    path = _old_database(tmp_path)
    before = path.read_bytes()
    found, sql = await schema.upgrade(_url(path), dry_run=True)
    assert found.legacy and before == path.read_bytes()
    assert "CREATE TABLE alembic_version" in sql
    assert f"INSERT INTO alembic_version (version_num) VALUES ('{schema.BASELINE}')" in sql
    assert "UPDATE anneal_meta SET value='alembic'" in sql
    assert f"SET version_num='{schema.head()}'" in sql


@pytest.mark.parametrize(
    ("sql", "refusal"),
    [
        (
            "UPDATE alembic_version SET version_num = '9999'",
            "revision 9999, which this control plane does not know",
        ),
        (
            "DROP TABLE alembic_version; UPDATE anneal_meta SET value = '3'",
            "schema version 3, from before release",
        ),
        ("DROP TABLE alembic_version; DROP TABLE anneal_meta", "but is not an anneal database"),
    ],
    ids=["newer-revision", "before-the-baseline", "not-anneal"],
)
async def test_database_this_code_cannot_upgrade_is_refused_by_name(
    tmp_path: Path, sql: str, refusal: str
) -> None:
    """A database from a newer anneal, from before the baseline, or of another program is refused, saying which."""
    path = tmp_path / "anneal.db"
    engine, _ = await open_database(_url(path), os.urandom(32))
    await engine.dispose()
    db = sqlite3.connect(path)
    db.executescript(sql)
    db.close()
    with pytest.raises(schema.SchemaError, match=refusal) as refused:
        await open_database(_url(path), os.urandom(32))
    assert not refused.value.upgradable


@pytest.fixture
def extra_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The project's revisions copied to a scratch directory that the test adds a revision 9001 to."""
    scratch = tmp_path / "migrations"
    shutil.copytree(schema.MIGRATIONS, scratch, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(schema, "MIGRATIONS", scratch)
    schema._script.cache_clear()
    schema.chain.cache_clear()
    yield scratch / "versions" / "r9001_test.py"
    schema._script.cache_clear()
    schema.chain.cache_clear()


def _write_revision(path: Path, body: str) -> None:
    path.write_text(
        '"""A test revision."""\n\nimport sqlalchemy as sa\nfrom alembic import op\n\n'
        f'revision = "9001"\ndown_revision = "{schema.head()}"\n\n\ndef upgrade() -> None:\n{body}'
    )
    schema._script.cache_clear()  # head() read the directory before this revision was in it
    schema.chain.cache_clear()


async def test_failed_upgrade_leaves_the_database_as_it_was(tmp_path: Path, extra_revision: Path) -> None:
    """A revision that fails part-way leaves no trace: no version table, no new table, the old meta row."""
    _write_revision(
        extra_revision,
        '    op.create_table("half", sa.Column("id", sa.Integer, primary_key=True))\n'
        '    op.execute("INSERT INTO nowhere VALUES (1)")\n',
    )
    path = _old_database(tmp_path)
    with pytest.raises(Exception, match="nowhere"):
        await schema.upgrade(_url(path))
    tables = {name for (name,) in _query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"half", "alembic_version"} & tables
    assert [("4",)] == _query(path, "SELECT value FROM anneal_meta")


async def test_table_copied_by_a_batch_alter_keeps_the_rows_that_refer_to_it(
    tmp_path: Path, extra_revision: Path
) -> None:
    """SQLite's batch ALTER copies and drops `stacks`: the resources whose foreign key cascades are all kept."""
    _write_revision(
        extra_revision,
        '    with op.batch_alter_table("stacks", recreate="always") as batch:\n'
        '        batch.add_column(sa.Column("note", sa.Text(), nullable=False, server_default=""))\n',
    )
    path = _old_database(tmp_path)
    resources = _query(path, "SELECT id, stack_id, name FROM resources ORDER BY id")
    assert resources, "the fixture has resources"
    await schema.upgrade(_url(path))
    assert "9001" == (await schema.status(_url(path))).current
    assert resources == _query(path, "SELECT id, stack_id, name FROM resources ORDER BY id")
    assert {("",)} == set(_query(path, "SELECT note FROM stacks"))


async def test_rows_made_before_projects_are_in_the_default_project_after_the_upgrade(tmp_path: Path) -> None:
    """Revision 0009 puts every stack, server, config and deployment of an older database in project default."""
    path = _old_database(tmp_path)
    await schema.upgrade(_url(path))
    for table in ("stacks", "servers", "configs", "deployments"):
        found = _query(path, f"SELECT project, count(*) FROM {table} GROUP BY project")
        assert [("default", True)] == [(project, bool(n)) for project, n in found], (table, found)
