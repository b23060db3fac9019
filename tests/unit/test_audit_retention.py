"""The audit log's retention (`--audit-retention-days`): rows past it are pruned in bounded batches.

Real SQLite with the control plane's schema; the rows are written by `audit.record`, the function the
audit middleware calls, and aged by setting their time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from control.documents.publish import HttpPublisher
from control.principal import ADMIN
from control.provision import EnrolProvisioner
from control.runtime import Runtime
from control.services import audit
from control.settings import Settings
from control.store.orm import AuditRow
from tests.support.database import Database

DAY = 86400.0


def _runtime(tmp_path: Path, database: Database, days: float) -> Runtime:
    settings = Settings(data_dir=tmp_path, database_url=database.url, audit_retention_days=days)
    return Runtime(settings, database.keys, database.sessions, HttpPublisher(), EnrolProvisioner())


async def _rows(rt: Runtime, ages: list[float]) -> None:
    """One audit row per age (days before now), written as the middleware writes them."""
    now = time.time()
    for i, age in enumerate(ages):
        await audit.record(rt, ADMIN, "heat", ("DELETE", "/v1/{project_id}/stacks", f"row-{i}"), 204)
        async with rt.sessions() as session:
            await session.execute(
                update(AuditRow).where(AuditRow.target == f"row-{i}").values(at=now - age * DAY)
            )
            await session.commit()


async def _targets(rt: Runtime) -> list[str]:
    async with rt.sessions() as session:
        return list(await session.scalars(select(AuditRow.target).order_by(AuditRow.id)))


async def test_rows_older_than_the_retention_are_pruned_and_the_rest_kept(
    tmp_path: Path, database: Database
) -> None:
    """With 90 days, rows of 91 and 400 days go; rows of 89 days and of now stay, in order."""
    rt = _runtime(tmp_path, database, 90)
    await _rows(rt, [400, 89, 91, 0])
    assert await audit.prune(rt) == 2
    assert await _targets(rt) == ["row-1", "row-3"]
    assert await audit.prune(rt) == 0


async def test_zero_retention_keeps_every_row(tmp_path: Path, database: Database) -> None:
    """`--audit-retention-days 0` prunes nothing, however old."""
    rt = _runtime(tmp_path, database, 0)
    await _rows(rt, [10_000, 1])
    assert await audit.prune(rt) == 0
    assert await _targets(rt) == ["row-0", "row-1"]


async def test_a_backlog_drains_in_bounded_batches(
    tmp_path: Path, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One prune deletes at most PRUNE_BATCH x PRUNE_ROUNDS rows, oldest first; the next takes the rest."""
    monkeypatch.setattr(audit, "PRUNE_BATCH", 3)
    monkeypatch.setattr(audit, "PRUNE_ROUNDS", 2)
    rt = _runtime(tmp_path, database, 1)
    await _rows(rt, [9, 8, 7, 6, 5, 4, 3, 0])
    assert await audit.prune(rt) == 6
    assert await _targets(rt) == ["row-6", "row-7"]
    assert await audit.prune(rt) == 1
    async with rt.sessions() as session:
        assert await session.scalar(select(func.count()).select_from(AuditRow)) == 1
