"""A request that loses a race on a versioned row runs again (control/txn.py ``retried_on_race``).

Real SQLite and the real stack services, no HTTP listener. The concurrent writer is
a second connection to the same database file: it commits a change to the stack's
row between the request's read and its write, what an engine step committing just
then does. Before the retry, `DELETE /v1/stacks/seed?force=true` answered 503 in CI
when a step of that stack committed first (the fuzz test, as admin).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm.exc import StaleDataError

from control.documents.publish import HttpPublisher
from control.principal import EVERYWHERE
from control.provision import EnrolProvisioner
from control.runtime import Runtime
from control.services import stacks
from control.settings import Settings
from control.store.orm import EventRow, StackRow
from control.txn import RACE_ATTEMPTS, retried_on_race
from tests.support.database import Database

TEMPLATE = {
    "heat_template_version": "2018-08-31",
    "resources": {"cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"config": "true"}}},
}


@dataclass
class Racer:
    """Commits a bump of the stack's row_version just before the request's own UPDATE of it."""

    path: Path
    times: int
    fired: int = 0

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("UPDATE stacks SET") and self.fired < self.times:
            self.fired += 1
            with sqlite3.connect(self.path, timeout=2) as other:
                other.execute("UPDATE stacks SET row_version = row_version + 1")


@dataclass
class Plane:
    rt: Runtime
    database: Database
    kicked: list[str]

    async def stack(self) -> StackRow:
        async with self.rt.sessions() as session:
            row = await session.scalar(select(StackRow).where(StackRow.name == "race"))
            assert row is not None
            return row

    async def events(self) -> list[str]:
        async with self.rt.sessions() as session:
            return list(await session.scalars(select(EventRow.reason).order_by(EventRow.id)))

    async def raced(self, times: int, call: Callable[[], Awaitable[Any]]) -> Racer:
        racer = Racer(Path(self.database.url.removeprefix("sqlite:///")), times)
        event.listen(self.database.engine.sync_engine, "before_cursor_execute", racer)
        try:
            await call()
        finally:
            event.remove(self.database.engine.sync_engine, "before_cursor_execute", racer)
        return racer


@pytest.fixture
async def plane(tmp_path: Path, database: Database) -> AsyncIterator[Plane]:
    settings = Settings(data_dir=tmp_path, database_url=database.url, provisioner="enrol")
    rt = Runtime(settings, database.keys, database.sessions, HttpPublisher(), EnrolProvisioner())
    kicked: list[str] = []
    await stacks.create_stack(rt, kicked.append, {"name": "race", "template": TEMPLATE})
    yield Plane(rt, database, kicked)


async def test_a_delete_that_lost_the_race_to_a_step_is_run_again_and_lands_once(plane: Plane) -> None:
    """The force delete's first commit finds the row moved on; its second attempt deletes."""
    racer = await plane.raced(
        1, lambda: stacks.delete_stack(plane.rt, plane.kicked.append, "race", True, within=EVERYWHERE)
    )
    assert racer.fired == 1
    after = await plane.stack()
    assert (after.action, after.status, after.force_delete) == ("DELETE", "IN_PROGRESS", True)
    assert len(plane.kicked) == 2  # the create's kick and the delete's: the lost attempt kicked nothing
    assert (await plane.events()).count("Stack DELETE started") == 1


async def test_a_cancel_that_lost_the_race_is_run_again(plane: Plane) -> None:
    """The same for `stack cancel` (the stack is CREATE_IN_PROGRESS: no engine runs here)."""
    racer = await plane.raced(
        1, lambda: stacks.cancel_stack(plane.rt, plane.kicked.append, "race", within=EVERYWHERE)
    )
    assert racer.fired == 1
    after = await plane.stack()
    assert (after.action, after.status) == ("CREATE", "FAILED")
    assert after.status_reason == "Stack CREATE cancelled"


async def test_a_request_that_loses_every_time_gives_up_and_lands_nothing(plane: Plane) -> None:
    """After RACE_ATTEMPTS lost races the error stands (the API answers 503), with nothing written."""
    with pytest.raises(StaleDataError):
        await plane.raced(
            RACE_ATTEMPTS + 5,
            lambda: stacks.delete_stack(plane.rt, plane.kicked.append, "race", False, within=EVERYWHERE),
        )
    after = await plane.stack()
    assert (after.action, after.status) == ("CREATE", "IN_PROGRESS")
    assert "Stack DELETE started" not in await plane.events()


async def test_only_a_lost_race_is_retried() -> None:
    """Any other error ends the first attempt; a success returns what the function returned."""
    calls: list[str] = []

    @retried_on_race
    async def refused(what: str) -> str:
        calls.append(what)
        raise ValueError(what)

    with pytest.raises(ValueError, match="no"):
        await refused("no")
    assert calls == ["no"]

    @retried_on_race
    async def raced_twice(what: str) -> str:
        calls.append(what)
        if len(calls) < 4:
            raise StaleDataError("raced (raised by the test)")
        return what.upper()

    assert await raced_twice("yes") == "YES"
    assert calls == ["no", "yes", "yes", "yes"]
