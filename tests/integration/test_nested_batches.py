"""A group's nested member stacks are stepped together: one transaction per batch of members.

Each member is a stack of its own (events, resources, status), but the engine claims the due
siblings of a nested stack together and steps them in one session and one commit
(control/engine/batch.py), instead of one transaction per member (docs/performance.md,
"Nested server templates"). The app runs in the test's process (tests/support/inprocess.py):
every fenced engine transaction is counted by the stacks it commits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.exc import StaleDataError

from control.engine import batch, slices, stackdef, step
from control.store import work
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn
from tests.support.inprocess import Plane
from tests.support.templates import done_at_once_member, group_of_members

MEMBERS = 12
MEMBER = done_at_once_member()
PARENT = group_of_members(MEMBERS)


class Fences:
    """Every fenced engine transaction, as the set of stacks it commits."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.transactions: list[set[str]] = []
        one, many = work.fence, work.fence_many

        async def fence(session: Any, claim: work.Claim, lease: float) -> None:
            await one(session, claim, lease)
            self.transactions.append({claim.stack_id})

        async def fence_many(session: Any, claims: list[work.Claim], lease: float) -> None:
            await many(session, claims, lease)
            self.transactions.append({c.stack_id for c in claims})

        monkeypatch.setattr(work, "fence", fence)
        monkeypatch.setattr(work, "fence_many", fence_many)

    def touching(self, stacks: set[str]) -> list[set[str]]:
        return [t for t in self.transactions if t & stacks]


async def _settled(plane: Plane, name: str) -> dict[str, Any]:
    for _ in range(600):  # bounded: ~60 s
        status, stack = await plane.call("GET", f"/v1/stacks/{name}")
        if status == 404 or not str(stack.get("status")).endswith("_IN_PROGRESS"):
            return dict(stack)
        await asyncio.sleep(0.1)
    raise AssertionError(f"the stack did not settle: {stack}")


async def _members(plane: Plane) -> set[str]:
    """The member stacks: the nested stacks of the group's own nested stack."""
    status, listed = await plane.call("GET", "/v1/stacks?nested=true")
    assert 200 == status, listed
    stacks = listed if isinstance(listed, list) else listed["stacks"]
    group = next(s["id"] for s in stacks if s.get("parent") and s.get("parent_resource") == "fleet")
    return {s["id"] for s in stacks if s.get("parent") == group}


async def _scenario(plane: Plane, fences: Fences) -> tuple[set[str], list[set[str]], list[set[str]]]:
    body = {"name": "fleet", "template": PARENT, "files": {"member.yaml": json.dumps(MEMBER)}}
    status, answer = await plane.call("POST", "/v1/stacks", body)
    assert 201 == status, answer
    stack = await _settled(plane, "fleet")
    assert "CREATE_COMPLETE" == stack["status"], stack
    members = await _members(plane)
    assert MEMBERS == len(members), members
    for member in sorted(members):  # each is still a stack of its own: status, resources, events
        status, shown = await plane.call("GET", f"/v1/stacks/{member}")
        assert (200, "CREATE_COMPLETE") == (status, shown["status"]), shown
        _, resources = await plane.call("GET", f"/v1/stacks/{member}/resources")
        assert {"cfg", "srv", "dep"} == {r["name"] for r in resources}, resources
        _, events = await plane.call("GET", f"/v1/stacks/{member}/events")
        ends = [e for e in events if e["resource_name"] == shown["name"] and e["status"] == "COMPLETE"]
        assert 1 == len(ends), events  # created once: no member's step ran twice
    created = fences.touching(members)
    status, answer = await plane.call("DELETE", "/v1/stacks/fleet")
    assert status in (200, 202, 204), answer
    gone = await _settled(plane, "fleet")
    assert gone.get("status") in (None, "DELETE_COMPLETE") or "not found" in json.dumps(gone).lower(), gone
    return members, created, fences.touching(members)[len(created) :]


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patch: Callable[[], None] = lambda: None, **settings: Any
) -> Any:
    fences = Fences(monkeypatch)
    patch()
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    # The group's walk makes all its members in one commit unless a test says otherwise: by default
    # it commits every few ms, and on a loaded machine the members then came due in two batches.
    plane.settings = dataclasses.replace(plane.settings, **{"step_slice": 0, **settings})
    try:
        loop.run_until_complete(plane.start())
        return loop.run_until_complete(asyncio.wait_for(_scenario(plane, fences), 120))
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()


def test_a_groups_nested_members_are_created_and_deleted_in_one_transaction_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve nested members done at once are created in one engine transaction and deleted in
    one, not one each, and each member is still a stack with its own status, resources, events."""
    members, created, deleted = _run(tmp_path, monkeypatch)
    assert [members] == created, f"the members' create took {len(created)} transactions: {created}"
    assert [members] == deleted, f"the members' delete took {len(deleted)} transactions: {deleted}"


def _failing_once(monkeypatch: pytest.MonkeyPatch, error: Exception, raised: list[str]) -> Callable[[], None]:
    """Make the first batched step of a member's create raise *error* (injected: a race or a bug
    cannot be timed from outside)."""
    real = step.run

    async def failing(txn: Any, stack: Any, *args: Any) -> Any:
        if not raised and stack.action == "CREATE":
            raised.append(stack.id)
            raise error
        return await real(txn, stack, *args)

    return lambda: monkeypatch.setattr("control.engine.batch.run", failing)


def test_a_batch_that_raced_is_stepped_again_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A race in one member's step (a concurrent change) rolls its batch back, and the batch is stepped
    again soon, whole: still one committed transaction for all the members, each created once."""
    raised: list[str] = []
    error = StaleDataError("raced (injected by the test)")
    members, created, deleted = _run(tmp_path, monkeypatch, _failing_once(monkeypatch, error, raised))
    assert raised and raised[0] in members, raised
    assert [members] == created, created
    assert [members] == deleted, deleted


def test_a_batch_that_fails_is_stepped_again_one_stack_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any other failure of one member's step rolls back its batch, whose members are then stepped one
    by one at once: every member is created exactly once and none waits for a lease to run out."""
    raised: list[str] = []
    error = RuntimeError("a bug in one member's step (injected by the test)")
    members, created, deleted = _run(tmp_path, monkeypatch, _failing_once(monkeypatch, error, raised))
    assert raised and raised[0] in members, raised
    assert MEMBERS == len(created), f"expected one transaction per member after the failed batch: {created}"
    assert all(len(t) == 1 for t in created), created
    assert [members] == deleted, deleted


def test_a_walk_that_commits_per_member_parses_and_reads_each_member_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's nested stack whose walk commits after every member it starts (step_slice 1) hands
    each member the definition it built (no member's step parses its template again), and its
    delete finds each member stack in the one read ahead of the step, not in a query of its own."""
    parsed: list[str] = []
    alone: list[str] = []
    real_build, real_get = stackdef.build, Txn.get

    def counted_build(*args: Any, stack_id: str, **kwargs: Any) -> Any:
        parsed.append(stack_id)
        return real_build(*args, stack_id=stack_id, **kwargs)

    async def counted_get(self: Txn, cls: type[Any], key: Any) -> Any:
        if cls is StackRow:
            alone.append(key)
        return await real_get(self, cls, key)

    monkeypatch.setattr(stackdef, "build", counted_build)
    monkeypatch.setattr(Txn, "get", counted_get)
    members, _, deleted = _run(tmp_path, monkeypatch, step_slice=1)
    assert members == set().union(*deleted), deleted  # every member deleted (in several commits)
    assert not members & set(parsed), f"member templates parsed again at their steps: {parsed}"
    assert not members & set(alone), f"member stacks read one by one: {alone}"


async def _drop_deployments(plane: Plane) -> list[str]:
    """Create the fleet, update it to members without their deployment, and say what each member lists."""
    body = {"name": "fleet", "template": PARENT, "files": {"member.yaml": json.dumps(MEMBER)}}
    status, answer = await plane.call("POST", "/v1/stacks", body)
    assert 201 == status, answer
    assert "CREATE_COMPLETE" == (await _settled(plane, "fleet"))["status"]
    smaller = {**MEMBER, "resources": {k: v for k, v in MEMBER["resources"].items() if k != "dep"}}
    body = {"template": PARENT, "files": {"member.yaml": json.dumps(smaller)}}
    status, answer = await plane.call("PUT", "/v1/stacks/fleet", body)
    assert status in (200, 202), answer
    assert "UPDATE_COMPLETE" == (await _settled(plane, "fleet"))["status"]
    listed = []
    for member in sorted(await _members(plane)):
        _, resources = await plane.call("GET", f"/v1/stacks/{member}/resources")
        listed.append(",".join(sorted(r["name"] for r in resources)))
    return listed


def test_members_updated_together_retire_what_they_dropped_in_one_query(tmp_path: Path) -> None:
    """A group's update that drops a resource from its member template retires that resource in
    every member (each then deletes it) with one query for all the members, not one query each."""
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, text: str, *args: Any) -> None:
        columns = " ".join(text.split()).partition(" FROM resources WHERE ")[0]
        if columns in (RETIRE_ONE, RETIRE_ALL):  # the names of a stack's current resources
            statements.append(columns)

    event.listen(Engine, "before_cursor_execute", seen)
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    # No commit inside a walk (each would retire what the walk did so far: a count set by the load).
    plane.settings = dataclasses.replace(plane.settings, step_slice=0)
    try:
        loop.run_until_complete(plane.start())
        listed = loop.run_until_complete(asyncio.wait_for(_drop_deployments(plane), 120))
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
        loop.run_until_complete(plane.stop())
        loop.close()
    assert ["cfg,srv"] * MEMBERS == listed, listed
    # One per stack for the operator's update of the top stack (services/stacks.py); the group's
    # nested stack and then its twelve members each in one for all of them.
    assert [RETIRE_ONE, RETIRE_ALL, RETIRE_ALL] == statements, statements


RETIRE_ONE = "SELECT resources.id, resources.name"
RETIRE_ALL = "SELECT resources.id, resources.stack_id, resources.name"


def test_a_sliced_step_of_a_group_reads_the_members_it_checks_in_one_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's nested stack stepped in slices (more members than a slice: SLICE made 4 here, it is
    2,000) reads the full rows of the members it checks together, not one query per member."""
    for module in (slices, batch):
        monkeypatch.setattr(module, "SLICE", 4)
    alone: list[Any] = []
    real_get = AsyncSession.get

    async def counted_get(self: AsyncSession, cls: Any, key: Any, **kwargs: Any) -> Any:
        if cls is ResourceRow:
            alone.append(key)
        return await real_get(self, cls, key, **kwargs)

    monkeypatch.setattr(AsyncSession, "get", counted_get)
    members, created, deleted = _run(tmp_path, monkeypatch)
    assert MEMBERS == len(members) and members == set().union(*created, *deleted), (created, deleted)
    assert [] == alone, f"resource rows read one by one: {alone}"


def test_a_groups_delete_reads_each_member_row_twice_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's nested stack, stepped again as each batch of its members is gone (batches of 4
    here), reads in full only the member rows it acts on: once to start the member's delete, once
    to delete its row after its nested stack is gone; and each member's nested stack row once. It
    read every member still deleting on each of those steps (full rows, decrypted, and their
    nested stacks' rows: quadratic in a group of 5,000)."""
    monkeypatch.setattr(batch, "BATCH", 4)
    deleting: list[bool] = []
    rows: Counter[int] = Counter()
    children: Counter[str] = Counter()
    real_call = Plane.call

    async def call(self: Plane, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        deleting.append(method == "DELETE" or bool(deleting and deleting[-1]))
        return await real_call(self, method, path, *args, **kwargs)

    def loaded(target: Any, context: Any) -> None:
        if not (deleting and deleting[-1]):
            return
        if isinstance(target, ResourceRow) and target.type == "member.yaml":
            rows[target.id] += 1
        elif isinstance(target, StackRow) and target.parent_id is not None:
            children[target.id] += 1

    monkeypatch.setattr(Plane, "call", call)
    event.listen(ResourceRow, "load", loaded)
    event.listen(StackRow, "load", loaded)
    try:
        members, _, deleted = _run(tmp_path, monkeypatch)
    finally:
        event.remove(ResourceRow, "load", loaded)
        event.remove(StackRow, "load", loaded)
    assert members == set().union(*deleted), deleted
    assert MEMBERS == len(rows) and max(rows.values()) <= 2, rows
    assert members <= set(children) and max(children[m] for m in members) <= 2, children


def test_a_batch_of_members_removes_their_servers_asking_one_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's delete removes every member's server, and the batch asks whether another stack
    still deploys to them in one query for all its members (asked per server, that query flushed
    each member's deletes alone), not one per member."""
    asked: list[str] = []

    def seen(conn: Any, cursor: Any, text: str, *args: Any) -> None:
        if " ".join(text.split()).startswith(USERS):
            asked.append(text)

    servers: list[Any] = []

    async def scenario(plane: Plane, fences: Fences) -> Any:
        found = await real(plane, fences)
        servers.append((await plane.call("GET", "/v1/servers"))[1])
        return found

    real = _scenario
    monkeypatch.setattr(f"{__name__}._scenario", scenario)
    event.listen(Engine, "before_cursor_execute", seen)
    try:
        members, _, deleted = _run(tmp_path, monkeypatch)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert [members] == deleted, deleted
    assert [[]] == servers, servers
    assert 1 == len(asked), asked


#: Whether a deployment still names a server (the DISTINCT query for many; one by one it was
#: "SELECT deployments.id FROM deployments WHERE deployments.server_id = ? LIMIT ?").
USERS = (
    "SELECT DISTINCT deployments.server_id FROM deployments",
    "SELECT deployments.id FROM deployments WHERE",
)


SERVER_OWNER = {
    "heat_template_version": "2018-08-31",
    "resources": {"srv": {"type": "OS::Heat::DeployedServer", "properties": {"name": "shared"}}},
}


async def _shared_server(plane: Plane) -> list[list[str]]:
    """One stack makes server `shared`, another deploys to it by name; the first is deleted, then the
    second: the servers listed after each delete."""
    user = {**MEMBER, "resources": {k: v for k, v in MEMBER["resources"].items() if k != "srv"}}
    user["resources"]["dep"] = {
        "type": "OS::Heat::SoftwareDeployment",
        "properties": {**MEMBER["resources"]["dep"]["properties"], "server": "shared"},
    }
    listed = []
    for name, template in (("owner", SERVER_OWNER), ("user", user)):
        status, answer = await plane.call("POST", "/v1/stacks", {"name": name, "template": template})
        assert 201 == status, answer
        assert "CREATE_COMPLETE" == (await _settled(plane, name))["status"], name
    for name in ("owner", "user"):
        status, answer = await plane.call("DELETE", f"/v1/stacks/{name}")
        assert status in (200, 202, 204), answer
        await _settled(plane, name)
        listed.append([s["name"] for s in (await plane.call("GET", "/v1/servers"))[1]])
    return listed


def test_a_server_another_stack_deploys_to_outlives_the_stack_that_made_it(tmp_path: Path) -> None:
    """Deleting the stack that made a server leaves the server while another stack's deployment
    still names it (asked at the commit, after the delete's own deployments are gone)."""
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    try:
        loop.run_until_complete(plane.start())
        listed = loop.run_until_complete(asyncio.wait_for(_shared_server(plane), 120))
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    assert [["shared"], ["shared"]] == listed, listed
