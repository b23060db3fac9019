"""A step publishes as its slices commit (control/engine/slices.py ``Slices.tick``, ``--step-slice``).

One test runs the app in this process (tests/support/inprocess.py) and records, in order,
the engine's steps and what the runtime publishes: the documents of a walk's first slices
leave before the step that wrote them ends. The other kills a real `anneal serve` with
SIGKILL between two slices of a step and restarts it: every deployment gets its
generation once, none is lost, none is issued twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from control.api.app_keys import RUNTIME
from control.engine import slices, step, worker
from control.runtime import Runtime
from control.store.orm import ServerRow
from control.transports.publisher import http_publisher
from tests.support.controlplane import start_control_plane, stop_control_plane
from tests.support.inprocess import Plane
from tests.support.templates import deployed_server

SERVERS = 6


def fleet(servers: int, prefix: str, transport: str = "CFN_SIGNAL", following: int | None = None) -> str:
    """*servers* servers, one script deployment each, waiting for a CFN signal nobody sends
    (NO_SIGNAL: each done once its document is out); only the first *following* take ``rev``."""
    lines = [
        "heat_template_version: 2018-08-31",
        "parameters:",
        "  rev: {type: string, default: r1}",
        "resources:",
        "  cfg:",
        "    type: OS::Heat::SoftwareConfig",
        "    properties: {group: script, config: 'true', inputs: [{name: REV}]}",
    ]

    def rev(i: int) -> str:
        return "{get_param: rev}" if following is None or i < following else "fixed"

    for i in range(servers):
        lines.append(deployed_server(f"srv{i}", name=f"{prefix}-{i}"))
        lines.append(
            f"  dep{i}: {{type: OS::Heat::SoftwareDeployment, properties: {{config: {{get_resource: cfg}}, "
            f"server: {{get_resource: srv{i}}}, input_values: {{REV: {rev(i)}}}, "
            f"signal_transport: {transport}}}}}"
        )
    return "\n".join(lines) + "\n"


def test_a_walks_first_slices_are_published_before_its_step_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two resources a slice, six deployments on six servers leave in several publishes within one step."""
    monkeypatch.setattr(
        slices, "COMMIT_AFTER", 3600.0
    )  # slices by count only: the test does not race a clock
    log: list[tuple[str, Any]] = []
    step_stack, publish = step.step_stack, Runtime.publish

    async def stepped(*args: Any, **kwargs: Any) -> tuple[bool, float | None]:
        log.append(("step", None))
        try:
            return await step_stack(*args, **kwargs)
        finally:
            log.append(("end", None))

    async def published(self: Runtime, ids: Any, *, announce: bool = True) -> None:
        ids = sorted(set(ids))
        await publish(self, ids, announce=announce)
        # What the publisher holds now: each server's document, with its serial, in an agent's reach.
        held = {i: self.publisher.http.get(i) for i in ids}  # type: ignore[attr-defined]
        log.append(("publish", {i: doc.serial for i, doc in held.items() if doc is not None}))

    monkeypatch.setattr(worker, "step_stack", stepped)
    monkeypatch.setattr(Runtime, "publish", published)
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    plane.settings = dataclasses.replace(plane.settings, step_slice=2)
    try:
        loop.run_until_complete(plane.start())
        status, body = loop.run_until_complete(
            plane.call("POST", "/v1/stacks", {"name": "sliced", "template": fleet(SERVERS, "early")})
        )
        assert 201 == status, body
        for _ in range(300):  # every deployment is out (bounded: ~30 s)
            deps = loop.run_until_complete(plane.deployments())
            if len(deps) == SERVERS and all(d.generation == 1 for d in deps):
                break
            loop.run_until_complete(asyncio.sleep(0.1))
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    servers = {d.server_id for d in deps}
    assert SERVERS == len(servers), deps
    # The step that started the deployments: the one during which their documents were published.
    batches: list[dict[str, int]] = []
    inside: list[dict[str, int]] = []
    for kind, what in log:
        if kind == "step":
            inside = []
        elif kind == "publish" and what.keys() & servers:
            inside.append(what)
        elif kind == "end" and inside:
            batches = inside
            break
    assert len(batches) >= 3, f"the deployments' documents left in {len(batches)} publish(es): {log}"
    assert servers == set().union(*batches), batches
    assert all(len(b) < SERVERS for b in batches), batches  # each publish carried a slice, not the whole
    assert all(serial >= 1 for b in batches for serial in b.values()), batches


async def _settled(plane: Plane, name: str) -> None:
    """Wait (bounded: ~30 s) until the stack is no longer in progress; it must have completed."""
    for _ in range(300):
        _, body = await plane.call("GET", f"/v1/stacks/{name}")
        if not body["status"].endswith("IN_PROGRESS"):
            assert body["status"].endswith("_COMPLETE"), body
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"stack {name} did not settle in 30 s")


def test_slices_grow_while_no_agent_waits_and_stay_short_while_agents_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two resources a slice: a create nobody polls doubles its slices; an update every server's
    long-poll waits on commits every 2 resources (4 after a slice that changed no document)."""
    monkeypatch.setattr(slices, "COMMIT_AFTER", 3600.0)  # by count only: the test does not race a clock
    sizes: list[int] = []
    commit = slices.Slices._commit

    async def counted(self: slices.Slices) -> None:
        sizes.append(self.acted)
        await commit(self)

    monkeypatch.setattr(slices.Slices, "_commit", counted)
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    plane.settings = dataclasses.replace(plane.settings, step_slice=2)
    text = fleet(12, "grow", "NO_SIGNAL")

    async def scenario() -> list[int]:
        await plane.start()
        assert 201 == (await plane.call("POST", "/v1/stacks", {"name": "grow", "template": text}))[0]
        await _settled(plane, "grow")
        created = list(sizes)
        sizes.clear()
        http = http_publisher(plane.app[RUNTIME].publisher)
        assert http is not None
        serials = await plane.serials()
        # Every server's agent holds a long-poll for its next document, as anneal-agent does.
        polls = [asyncio.ensure_future(http.wait_newer(s, f'"{n}"', 60)) for s, n in serials.items()]
        await asyncio.sleep(0)
        assert all(http.waits(s) for s in serials)
        body = {"template": text, "parameters": {"rev": "r2"}}
        assert 202 == (await plane.call("PUT", "/v1/stacks/grow", body))[0]
        await _settled(plane, "grow")
        await asyncio.wait_for(asyncio.gather(*polls), 60)  # each got its new document
        return created

    try:
        created = loop.run_until_complete(scenario())
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    assert created[:3] == [2, 4, 8], created  # nobody waited: each slice twice the last
    assert sizes and max(sizes) <= 4, sizes
    assert sizes.count(2) >= 4, sizes


def test_a_sliced_update_loads_only_the_deployments_that_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stack stepped in slices of 4: an update that changes 2 of 12 deployments loads those 2 rows
    only, and each slice holds only the servers its resources name (not the stack's 12)."""
    monkeypatch.setattr(slices, "SLICE", 4)
    loaded: list[str] = []
    servers: list[list[str]] = []
    deployments = slices.Slices._deployments

    async def counted(self: slices.Slices, rows: list[Any], *args: Any) -> None:
        await deployments(self, rows, *args)
        loaded.extend(r.resource_name for r in self._loaded)  # what the slice holds
        mapped = self._txn.session.sync_session.identity_map.values()
        servers.append(sorted(s.name for s in mapped if isinstance(s, ServerRow)))  # what the step holds

    monkeypatch.setattr(slices.Slices, "_deployments", counted)
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    text = fleet(12, "part", "NO_SIGNAL", following=2)

    async def scenario() -> dict[str, int]:
        await plane.start()
        assert 201 == (await plane.call("POST", "/v1/stacks", {"name": "part", "template": text}))[0]
        await _settled(plane, "part")
        loaded.clear()
        servers.clear()
        body = {"template": text, "parameters": {"rev": "r2"}}
        assert 202 == (await plane.call("PUT", "/v1/stacks/part", body))[0]
        await _settled(plane, "part")
        return {d.resource_name: d.generation for d in await plane.deployments()}

    try:
        generations = loop.run_until_complete(scenario())
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    assert sorted(loaded) == ["dep0", "dep1"], loaded
    # Each slice holds the servers its resources name (its own two, and the one its first
    # deployment may need from the slice before), not the stack's twelve.
    assert len(servers) >= 6 and max(map(len, servers)) <= 3, servers
    assert {n for held in servers for n in held} == {f"part-{i}" for i in range(12)}, servers
    assert {n: g for n, g in generations.items() if g != 1} == {"dep0": 2, "dep1": 2}, generations


def test_a_sliced_create_reads_each_slice_s_servers_in_one_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices of 10 over 40 servers with a deployment each: the servers a slice's new deployments
    run on are read with the slice (``servers.id IN (...)``, a query a slice), none by its id alone
    (``servers.id = ?``: a query for each deployment)."""
    monkeypatch.setattr(slices, "SLICE", 10)
    reads: list[str] = []

    def seen(conn: Any, cursor: Any, text: str, *args: Any) -> None:
        if " ".join(text.split()).startswith("SELECT servers.id,") and "WHERE servers.id = " in text:
            reads.append(text.rpartition("WHERE")[2].strip())

    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)

    async def scenario() -> list[int]:
        await plane.start()
        event.listen(Engine, "before_cursor_execute", seen)
        try:
            assert (
                201
                == (
                    await plane.call(
                        "POST", "/v1/stacks", {"name": "s", "template": fleet(40, "s", "NO_SIGNAL")}
                    )
                )[0]
            )
            await _settled(plane, "s")
        finally:
            event.remove(Engine, "before_cursor_execute", seen)
        return [d.generation for d in await plane.deployments()]

    try:
        generations = loop.run_until_complete(scenario())
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    assert [1] * 40 == generations, generations
    assert [] == reads, reads


def _started(db: Path) -> dict[str, tuple[int, str]]:
    """Committed deployments that have a generation: id -> (generation, derived config id)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        rows = conn.execute("SELECT id, generation, item_id FROM deployments WHERE generation >= 1")
        return {i: (g, item) for i, g, item in rows}


def test_a_kill_between_slices_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """SIGKILL once some slices of a step committed: after a restart every deployment has its one generation."""
    count, extra = 40, ("--provisioner", "enrol", "--step-slice", "1", "--work-lease", "2")
    cp = start_control_plane(tmp_path, *extra)
    db = cp.data_dir / "anneal.db"
    try:
        created = cp.create("killed", fleet(count, "kill"))
        assert 201 == created.status, created.body
        before: dict[str, tuple[int, str]] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not 0 < len(before) < count:
            before = _started(db)
            if len(before) == count:
                pytest.fail("the step committed all its slices before the test could kill it between two")
            time.sleep(0.002)
        assert 0 < len(before) < count, f"{len(before)} of {count} deployments started"
        cp.crash()
        cp = start_control_plane(tmp_path, *extra, port=cp.port)
        after: dict[str, tuple[int, str]] = {}
        for _ in range(600):  # the restarted process resumes the step (its lease expired), ~60 s bound
            after = _started(db)
            if len(after) == count:
                break
            time.sleep(0.1)
    finally:
        stop_control_plane(cp)
    assert count == len(after), f"{count - len(after)} deployment(s) lost"
    assert {i: after[i] for i in before} == before  # issued once: same generation, same derived config
    assert {g for g, _ in after.values()} == {1}, after
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        started = conn.execute(
            "SELECT resource_name, count(*) FROM events WHERE action = 'CREATE' AND status = 'IN_PROGRESS' "
            "AND deployment_id IS NOT NULL GROUP BY resource_name"
        ).fetchall()
    assert {f"dep{i}" for i in range(count)} == {name for name, _ in started}
    assert all(n == 1 for _, n in started), started
