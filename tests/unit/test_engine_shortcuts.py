"""The engine's shortcuts for big stacks: the waiting-only check, and new rows kept in the session."""

from __future__ import annotations

import gc

from sqlalchemy import event

from control.engine.idle import all_waiting
from control.store.orm import ServerRow
from tests.support.database import Database

DEP = "OS::Heat::SoftwareDeployment"
GROUP = "OS::Heat::SoftwareDeploymentGroup"


def test_waiting_only_when_everything_left_waits_for_its_signal() -> None:
    """Done resources plus ones waiting for signals: the step may be skipped."""
    groups = [("COMPLETE", True, True, DEP, 40), ("IN_PROGRESS", True, False, DEP, 10)]
    assert all_waiting(groups, 50)


def test_a_resource_to_start_fail_or_clean_up_needs_the_full_step() -> None:
    """Anything the full step would act on makes the shortcut answer no."""
    waiting = ("IN_PROGRESS", True, True, DEP, 10)
    assert not all_waiting([waiting, ("COMPLETE", True, False, DEP, 1)], 11)  # done in an older traversal
    assert not all_waiting([waiting, ("FAILED", True, True, DEP, 1)], 11)
    assert not all_waiting([waiting, ("INIT", True, True, DEP, 1)], 11)
    assert not all_waiting([waiting, ("COMPLETE", False, True, DEP, 1)], 11)  # replaced: to clean up
    assert not all_waiting([waiting], 12)  # a resource of the template has no row yet
    assert not all_waiting([("COMPLETE", True, True, DEP, 10)], 10)  # all done: the stack finishes
    assert not all_waiting([("IN_PROGRESS", True, True, GROUP, 1)], 1)  # a group follows its members


async def test_a_row_created_in_a_session_is_found_again_without_a_query(database: Database) -> None:
    """Once flushed, a new row stays in the identity map even with no reference left to it."""
    statements: list[str] = []
    event.listen(database.engine.sync_engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    async with database.sessions() as session:
        session.add(ServerRow(id="s1", name="one", status="NEW", created_at=0.0))
        await session.flush()
        gc.collect()  # the weak identity map would drop it here
        before = len(statements)
        found = await session.get(ServerRow, "s1")
        assert found is not None
        assert found.name == "one"
        assert len(statements) == before  # answered from the session, no SELECT
