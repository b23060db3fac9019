"""Versioned rows written in bulk on real PostgreSQL (control/store/bulk.py): one statement, the ORM's check.

asyncpg reports no row count for an executemany, so on PostgreSQL the changed rows of a
shape go as one ``UPDATE … FROM (VALUES …) RETURNING`` and the returned ids are counted.
Each was one UPDATE per row before: 10,000 deployments sent 20,000 of them at create.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.orm.exc import StaleDataError

from control import keys
from control.settings import async_url
from control.store import bulk
from control.store.db import open_database
from control.store.orm import StackRow
from tests.support.database import bare_stack
from tests.support.pg import Postgres

STACKS = 7


def test_changed_rows_go_in_one_statement_checked_by_version(postgres: Postgres, tmp_path: Path) -> None:
    url = async_url(postgres.new_database())

    async def run() -> tuple[list[str], dict[str, tuple[Any, ...]], str, set[str]]:
        engine, sessions = await open_database(url, keys.load_or_create(tmp_path / "keys").data_key)
        sent: list[str] = []
        event.listen(engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
        try:
            async with sessions() as s:
                s.add_all([bare_stack(f"s{n}", template={"n": n}) for n in range(STACKS)])
                await s.commit()
            async with sessions() as s:
                rows = list(await s.scalars(select(StackRow).order_by(StackRow.id)))
                for row in rows:  # two shapes: status alone, status and the encrypted template
                    row.status = "COMPLETE"
                    if row.id in ("s1", "s2"):
                        row.template = {"changed": row.id}
                        row.timeout_mins = None  # a column of NULLs only: typed text in VALUES
                sent.clear()
                assert STACKS == await s.run_sync(bulk.write_dirty, (StackRow,))
                updates = [q for q in sent if q.startswith("UPDATE stacks")]
                await s.commit()
            async with sessions() as s:
                found = {
                    r.id: (r.status, r.template, r.row_version) for r in await s.scalars(select(StackRow))
                }
            async with sessions() as s:  # a row another transaction moved fails the whole write
                rows = list(await s.scalars(select(StackRow)))
                for row in rows:
                    row.status_reason = "mine"
                async with sessions() as other:
                    await other.execute(
                        update(StackRow)
                        .where(StackRow.id == "s3")
                        .values(row_version=StackRow.row_version + 1)
                    )
                    await other.commit()
                with pytest.raises(StaleDataError) as stale:
                    await s.run_sync(bulk.write_dirty, (StackRow,))
                await s.rollback()
            async with sessions() as s:
                reasons = set(await s.scalars(select(StackRow.status_reason)))
            return updates, found, str(stale.value), reasons
        finally:
            await engine.dispose()

    updates, found, stale, reasons = asyncio.run(run())
    assert 2 == len(updates) and all("FROM (VALUES" in q and "RETURNING" in q for q in updates), updates
    for n in range(STACKS):
        template = {"changed": f"s{n}"} if n in (1, 2) else {"n": n}
        assert ("COMPLETE", template, 2) == found[f"s{n}"]
    assert f"expected to update {STACKS} row(s); {STACKS - 1} were matched" in stale
    assert "mine" not in reasons
