"""A deployment group's step while its batch runs: decided by counting its members (real SQLite).

`group_members.batch_busy` is the shortcut `DeploymentGroup.check` takes before it loads any
member: true only while some member of the running batch is IN_PROGRESS, none FAILED
and none past its deadline. Every other case must fall through to the full check,
which fails the group, times members out or starts the next batch.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from control.resources import group_members
from control.store.orm import DeploymentRow
from control.txn import Txn
from tests.support.database import sqlite_database


def busy(tmp_path: Path, statuses: dict[str, tuple[str, float]], state: dict[str, Any]) -> bool:
    """Store one member deployment per (status, seconds since it started) and ask `batch_busy`."""

    async def run() -> bool:
        async with sqlite_database(tmp_path) as db, db.sessions() as session:
            now = time.time()
            for dep_id, (status, age) in statuses.items():
                session.add(
                    DeploymentRow(
                        id=dep_id,
                        server_id="srv",
                        status=status,
                        timeout=60.0,
                        started_at=now - age,
                        created_at=now,
                        updated_at=now,
                    )
                )
            await session.commit()
            # Txn's runtime is used only to publish documents; this reads.
            return await group_members.batch_busy(Txn(session, None), state)  # type: ignore[arg-type]

    return asyncio.run(run())


def plan(running: list[str], action: str = "CREATE") -> dict[str, Any]:
    return {"action": action, "members": {k: f"dep-{k}" for k in "abcd"}, "running": running}


@pytest.mark.parametrize(
    ("statuses", "state", "expected"),
    [
        ({"dep-a": ("IN_PROGRESS", 1), "dep-b": ("IN_PROGRESS", 1)}, plan(["a", "b"]), True),
        ({"dep-a": ("COMPLETE", 1), "dep-b": ("IN_PROGRESS", 1)}, plan(["a", "b"]), True),
        ({"dep-a": ("COMPLETE", 1), "dep-b": ("COMPLETE", 1)}, plan(["a", "b"]), False),  # batch done
        ({"dep-a": ("FAILED", 1), "dep-b": ("IN_PROGRESS", 1)}, plan(["a", "b"]), False),  # fail the group
        ({"dep-a": ("IN_PROGRESS", 120), "dep-b": ("IN_PROGRESS", 1)}, plan(["a", "b"]), False),  # timed out
        ({"dep-a": ("IN_PROGRESS", 1)}, plan([]), False),  # nothing running: start the next batch
        ({"dep-a": ("IN_PROGRESS", 1)}, plan(["a"], action="DELETE"), False),  # delete has its own check
        # members outside the running batch do not count
        ({"dep-a": ("COMPLETE", 1), "dep-c": ("IN_PROGRESS", 1)}, plan(["a"]), False),
    ],
)
def test_a_batch_is_busy_only_while_a_member_runs_in_time(
    tmp_path: Path, statuses: dict[str, tuple[str, float]], state: dict[str, Any], expected: bool
) -> None:
    """A rolling batch holds the group only while one of its members runs, none failed and none timed out."""
    assert expected == busy(tmp_path, statuses, state)


def test_batch_busy_sums_over_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted in chunks of BUSY_CHUNK ids: a failure or the only running member in a later chunk still counts."""
    monkeypatch.setattr(group_members, "BUSY_CHUNK", 1)
    running: dict[str, tuple[str, float]] = {
        "dep-a": ("COMPLETE", 1),
        "dep-b": ("COMPLETE", 1),
        "dep-c": ("IN_PROGRESS", 1),
    }
    assert busy(tmp_path / "1", running, plan(["a", "b", "c"]))
    failed: dict[str, tuple[str, float]] = {
        "dep-a": ("IN_PROGRESS", 1),
        "dep-b": ("IN_PROGRESS", 1),
        "dep-c": ("FAILED", 1),
    }
    assert not busy(tmp_path / "2", failed, plan(["a", "b", "c"]))
    late: dict[str, tuple[str, float]] = {
        "dep-a": ("IN_PROGRESS", 1),
        "dep-b": ("IN_PROGRESS", 1),
        "dep-c": ("IN_PROGRESS", 90),
    }
    assert not busy(tmp_path / "3", late, plan(["a", "b", "c"]))
