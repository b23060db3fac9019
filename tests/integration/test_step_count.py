"""How many engine steps a nested stack takes: as few as its resources allow.

Each nested stack is a unit of durable work of its own (claimed, fenced, stepped, released),
so a step more per nested stack is a step more per member of a group (docs/performance.md,
"Nested server templates"). The app runs in the test's process (tests/support/inprocess.py)
and every engine step is counted by the stack it stepped.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from control.engine import slices, worker
from control.store import work
from tests.support.inprocess import Plane
from tests.support.templates import done_at_once_member

MEMBER = done_at_once_member("counted-srv")
PARENT = {"heat_template_version": "2018-08-31", "resources": {"member": {"type": "member.yaml"}}}


async def _settled(plane: Plane, name: str) -> dict[str, Any]:
    for _ in range(300):  # bounded: ~30 s
        status, stack = await plane.call("GET", f"/v1/stacks/{name}")
        if status == 404 or not str(stack.get("status")).endswith("_IN_PROGRESS"):
            return dict(stack)
        await asyncio.sleep(0.1)
    raise AssertionError(f"the stack did not settle: {stack}")


async def _scenario(plane: Plane, steps: Counter[str]) -> tuple[int, int, dict[str, Any]]:
    body = {"name": "counted", "template": PARENT, "files": {"member.yaml": json.dumps(MEMBER)}}
    status, answer = await plane.call("POST", "/v1/stacks", body)
    assert 201 == status, answer
    stack = await _settled(plane, "counted")
    assert "CREATE_COMPLETE" == stack["status"], stack
    _, resources = await plane.call("GET", "/v1/stacks/counted/resources")
    child = next(r["physical_id"] for r in resources if r["name"] == "member")
    created = steps[child]
    status, answer = await plane.call("DELETE", "/v1/stacks/counted")
    assert status in (200, 202, 204), answer
    gone = await _settled(plane, "counted")
    return created, steps[child] - created, gone


@pytest.mark.parametrize("commit_after", [slices.COMMIT_AFTER, 0.0], ids=["as-set", "every-act-committed"])
def test_a_nested_stack_done_at_once_is_created_in_one_step_and_deleted_in_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit_after: float
) -> None:
    """A nested stack whose resources complete at once settles in the step that starts them, and
    its delete removes the deployment, then the server and config it required, in one step.

    A step commits what it did so far once its first act is COMMIT_AFTER old (slices.tick); on
    a loaded machine that is within the step, as ``every-act-committed`` forces: a step the walk
    asked of its own stack must not be committed with it (the stack was then stepped again for
    nothing, once in CI)."""
    monkeypatch.setattr(slices, "COMMIT_AFTER", commit_after)
    steps: Counter[str] = Counter()
    real = worker.Engine.step

    async def counted(self: worker.Engine, claim: work.Claim) -> tuple[bool, float | None]:
        steps[claim.stack_id] += 1
        return await real(self, claim)

    monkeypatch.setattr(worker.Engine, "step", counted)
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    try:
        loop.run_until_complete(plane.start())
        created, deleted, gone = loop.run_until_complete(asyncio.wait_for(_scenario(plane, steps), 120))
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    assert "Stack not found" in json.dumps(gone) or gone.get("status") in (None, "DELETE_COMPLETE"), gone
    assert 1 == created, f"the nested stack's create took {created} engine steps"
    assert 1 == deleted, f"the nested stack's delete took {deleted} engine steps"
