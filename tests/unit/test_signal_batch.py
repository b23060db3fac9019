"""Signals applied in batches (control/batch.py): one transaction, answered after commit.

Real SQLite, the real engine and the real signal path (`agents.record_signal`, the
function `POST /v1/signal/...` calls); no HTTP listener. The "crash" between
receiving a batch and committing it is a commit that fails (the database refuses
it), which leaves the database exactly as a process killed at that instant would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm.exc import StaleDataError

from control.documents.publish import HttpPublisher
from control.engine.stackdef import Definitions
from control.engine.worker import Engine
from control.errors import StaleSignalError
from control.principal import EVERYWHERE
from control.provision import EnrolProvisioner
from control.runtime import Runtime
from control.services import agents, stacks
from control.settings import Settings
from control.signals import batch
from control.store import bulk
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from tests.support.database import Database

DEPLOYMENTS = 6


def template() -> dict[str, Any]:
    resources: dict[str, Any] = {
        "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "true"}},
        "srv": {"type": "OS::Heat::DeployedServer", "properties": {"name": "batch-srv"}},
    }
    for i in range(DEPLOYMENTS):
        resources[f"d{i}"] = {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {
                "config": {"get_resource": "cfg"},
                "server": {"get_resource": "srv"},
                "signal_transport": "CFN_SIGNAL",
            },
        }
    return {"heat_template_version": "2018-08-31", "resources": resources}


@dataclass
class Plane:
    rt: Runtime
    engine: Engine
    publisher: HttpPublisher
    db: AsyncEngine

    async def signal_urls(self) -> dict[str, tuple[int, str]]:
        """deployment id -> (generation, sig), read from the signed document as an agent would."""
        for _ in range(400):
            async with self.rt.sessions() as session:
                server_id = await session.scalar(select(DeploymentRow.server_id).limit(1))
            doc = self.publisher.get(server_id) if server_id else None
            if doc is not None:
                body = json.loads(doc.body)
                if len(body["deployments"]) == DEPLOYMENTS:
                    found = {}
                    for item in body["deployments"]:
                        meta = body["anneal"]["deployments"][item["id"]]
                        url = next(i["value"] for i in item["inputs"] if i["name"] == "deploy_signal_id")
                        sig = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["sig"][0]
                        found[meta["deployment_id"]] = (meta["generation"], sig)
                    return found
            await asyncio.sleep(0.05)
        raise AssertionError("the deployments never reached the server's document")

    async def signal(self, dep_id: str, generation: int, sig: str, nonce: str = "n1") -> dict[str, Any]:
        body = {
            "deploy_status_code": 0,
            "deploy_stdout": "ok",
            "deploy_stderr": "",
            "anneal": {"nonce": nonce},
        }
        return await agents.record_signal(
            self.rt, self.engine.kick, dep_id, generation, body, sig=sig, server_id=None
        )

    async def wait_generation(self, generation: int) -> None:
        """Until every deployment has reached *generation* (bounded: 20 s)."""
        for _ in range(400):
            async with self.rt.sessions() as session:
                low = await session.scalar(select(func.min(DeploymentRow.generation)))
            if low is not None and low >= generation:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the deployments never reached generation {generation}")

    async def statuses(self) -> dict[str, str]:
        async with self.rt.sessions() as session:
            return {r[0]: r[1] for r in await session.execute(select(DeploymentRow.id, DeploymentRow.status))}

    async def stack_state(self) -> str:
        for _ in range(400):
            async with self.rt.sessions() as session:
                row = (await session.execute(select(StackRow.action, StackRow.status))).first()
            assert row is not None
            if row[1] != "IN_PROGRESS":
                return f"{row[0]}_{row[1]}"
            await asyncio.sleep(0.05)
        return "IN_PROGRESS"


@pytest.fixture
async def plane(tmp_path: Path, database: Database) -> AsyncIterator[Plane]:
    settings = Settings(
        data_dir=tmp_path,
        database_url=database.url,
        provisioner="enrol",
        default_signal_transport="CFN_SIGNAL",
    )
    publisher = HttpPublisher()
    rt = Runtime(settings, database.keys, database.sessions, publisher, EnrolProvisioner())
    engine = Engine(rt, Definitions())
    await engine.resume()
    await stacks.create_stack(rt, engine.kick, {"name": "batch", "template": template()})
    try:
        yield Plane(rt, engine, publisher, database.engine)
    finally:
        await engine.close()


async def test_signals_arriving_together_share_a_transaction_and_each_applies_once(plane: Plane) -> None:
    """Every deployment signalled at once: fewer transactions than signals, each result recorded once."""
    urls = await plane.signal_urls()
    answers = await asyncio.gather(*(plane.signal(d, g, s) for d, (g, s) in urls.items()))
    assert [a["duplicate"] for a in answers] == [False] * DEPLOYMENTS
    queue = batch.batch_for(plane.rt)
    assert queue.applied == DEPLOYMENTS
    assert queue.batches < DEPLOYMENTS  # they queued behind the first one and went in together
    assert set((await plane.statuses()).values()) == {"COMPLETE"}
    assert await plane.stack_state() == "CREATE_COMPLETE"
    again = await asyncio.gather(*(plane.signal(d, g, s) for d, (g, s) in urls.items()))
    assert [a["duplicate"] for a in again] == [True] * DEPLOYMENTS
    assert queue.applied == DEPLOYMENTS


async def test_a_refused_signal_fails_alone_and_the_rest_of_its_batch_applies(plane: Plane) -> None:
    """A stale generation in the same batch gets its 409; the others are recorded."""
    urls = await plane.signal_urls()
    stale_id, (generation, _) = next(iter(urls.items()))
    good = [plane.signal(d, g, s) for d, (g, s) in urls.items() if d != stale_id]
    stale_sig = plane.rt.keys.signal_signature(stale_id, generation - 1)
    results = await asyncio.gather(
        plane.signal(stale_id, generation - 1, stale_sig), *good, return_exceptions=True
    )
    assert isinstance(results[0], StaleSignalError)
    assert all(isinstance(r, dict) and not r["duplicate"] for r in results[1:])
    statuses = await plane.statuses()
    assert statuses[stale_id] == "IN_PROGRESS"
    assert sorted(s for d, s in statuses.items() if d != stale_id) == ["COMPLETE"] * (DEPLOYMENTS - 1)


async def test_a_batch_that_never_commits_is_not_acknowledged_and_the_resend_applies_once(
    plane: Plane,
) -> None:
    """Crash between receiving and committing: no caller is told OK, nothing is stored; the
    agents' re-sends are applied exactly once, and a further re-send is a duplicate."""
    urls = await plane.signal_urls()
    real_sessions = plane.rt.sessions
    failures = {"left": DEPLOYMENTS + 1}  # the batch and each signal retried alone all fail

    class Dying:
        def __init__(self) -> None:
            self._cm = real_sessions()

        async def __aenter__(self) -> Any:
            session = await self._cm.__aenter__()
            real_commit = session.commit

            async def commit() -> None:
                if failures["left"] > 0:
                    failures["left"] -= 1
                    await session.rollback()
                    raise ConnectionError("the control plane died before this commit")
                await real_commit()

            session.commit = commit  # type: ignore[method-assign]
            return session

        async def __aexit__(self, *exc: Any) -> Any:
            return await self._cm.__aexit__(*exc)

    # Only the signal queue's transactions die; the engine's carry on.
    plane.rt.signal_batch = batch.SignalBatch(dataclasses.replace(plane.rt, sessions=Dying))  # type: ignore[arg-type]
    first = await asyncio.gather(
        *(plane.signal(d, g, s) for d, (g, s) in urls.items()), return_exceptions=True
    )
    assert failures["left"] == 0
    plane.rt.signal_batch = None  # the restarted process: a fresh queue
    assert all(isinstance(r, ConnectionError) for r in first), first  # nobody was acknowledged
    assert set((await plane.statuses()).values()) == {"IN_PROGRESS"}  # and nothing was stored
    resent = await asyncio.gather(*(plane.signal(d, g, s) for d, (g, s) in urls.items()))
    assert [r["duplicate"] for r in resent] == [False] * DEPLOYMENTS
    once_more = await asyncio.gather(*(plane.signal(d, g, s) for d, (g, s) in urls.items()))
    assert [r["duplicate"] for r in once_more] == [True] * DEPLOYMENTS
    assert set((await plane.statuses()).values()) == {"COMPLETE"}
    assert await plane.stack_state() == "CREATE_COMPLETE"


async def test_a_batch_writes_its_results_in_one_update_per_table(plane: Plane) -> None:
    """The results go in one executemany UPDATE per table (not one per row), read back intact."""
    urls = await plane.signal_urls()
    async with plane.rt.sessions() as session:
        versions = {
            r[0]: r[1] for r in await session.execute(select(DeploymentRow.id, DeploymentRow.row_version))
        }
    updates: list[tuple[str, int]] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        if statement.startswith("UPDATE deployments") or statement.startswith("UPDATE resources"):
            updates.append((statement.split()[1], len(params) if executemany else 1))

    event.listen(plane.db.sync_engine, "before_cursor_execute", seen)
    try:
        queue = batch.batch_for(plane.rt)
        answers = await asyncio.gather(*(plane.signal(d, g, s, nonce=f"n-{d}") for d, (g, s) in urls.items()))
    finally:
        event.remove(plane.db.sync_engine, "before_cursor_execute", seen)
    assert [a["duplicate"] for a in answers] == [False] * DEPLOYMENTS
    by_table: dict[str, list[int]] = {}
    for table, count in updates:
        by_table.setdefault(table, []).append(count)
    # one statement per table and batch, carrying every row of the batch
    assert len(by_table["deployments"]) == queue.batches
    assert sum(by_table["deployments"]) == DEPLOYMENTS
    assert sum(by_table["resources"]) == DEPLOYMENTS
    async with plane.rt.sessions() as session:
        deps = {d.id: d for d in await session.scalars(select(DeploymentRow))}
        rows = {
            r.physical_id: r
            for r in await session.scalars(
                select(ResourceRow).where(ResourceRow.type == "OS::Heat::SoftwareDeployment")
            )
        }
    for dep_id, dep in deps.items():
        assert (dep.status, dep.stdout, dep.status_code, dep.signal_nonce) == (
            "COMPLETE",
            "ok",
            0,
            f"n-{dep_id}",
        )
        assert dep.row_version == versions[dep_id] + 1
        assert rows[dep_id].status == "COMPLETE"
        assert rows[dep_id].attributes["deploy_stdout"] == "ok"  # the encrypted column, decrypted again


async def test_a_row_changed_meanwhile_fails_the_bulk_write_and_nothing_of_it_lands(plane: Plane) -> None:
    """bulk.write_dirty checks row_version like the ORM: a row another transaction moved raises."""
    urls = await plane.signal_urls()
    async with plane.rt.sessions() as session:
        deps = list(await session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(list(urls)))))
        for dep in deps:
            dep.stdout = "mine"
        async with plane.rt.sessions() as other:  # another process changes one of them first
            await other.execute(
                update(DeploymentRow)
                .where(DeploymentRow.id == deps[0].id)
                .values(row_version=DeploymentRow.row_version + 1)
            )
            await other.commit()
        with pytest.raises(StaleDataError, match=f"expected to update {DEPLOYMENTS} row"):
            await session.run_sync(bulk.write_dirty, (DeploymentRow,))
        await session.rollback()
    async with plane.rt.sessions() as session:
        assert "mine" not in set(await session.scalars(select(DeploymentRow.stdout)))


async def test_an_engine_step_writes_its_changed_rows_in_one_update_per_shape(plane: Plane) -> None:
    """An update's step re-runs every deployment: their rows go in executemany UPDATEs, none alone."""
    urls = await plane.signal_urls()
    await asyncio.gather(*(plane.signal(d, g, s) for d, (g, s) in urls.items()))
    assert await plane.stack_state() == "CREATE_COMPLETE"
    rows_per_statement: dict[str, list[int]] = {"deployments": [], "resources": []}

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        if statement.startswith(("UPDATE deployments", "UPDATE resources")) and "IN (" not in statement:
            rows_per_statement[statement.split()[1]].append(len(params) if executemany else 1)

    changed = template()
    changed["resources"]["cfg"]["properties"]["config"] = "true # changed"
    event.listen(plane.db.sync_engine, "before_cursor_execute", seen)
    try:
        await stacks.update_stack(
            plane.rt, plane.engine.kick, "batch", {"template": changed}, within=EVERYWHERE
        )
        await plane.wait_generation(2)
    finally:
        event.remove(plane.db.sync_engine, "before_cursor_execute", seen)
    # the six deployments and their six resources went together (the ORM sends one statement per row)
    assert DEPLOYMENTS in rows_per_statement["deployments"], rows_per_statement
    assert DEPLOYMENTS in rows_per_statement["resources"], rows_per_statement
    assert len(rows_per_statement["deployments"]) < DEPLOYMENTS, rows_per_statement
    async with plane.rt.sessions() as session:
        deps = list(await session.scalars(select(DeploymentRow)))
    assert (
        sorted((d.action, d.status, d.generation) for d in deps)
        == [("UPDATE", "IN_PROGRESS", 2)] * DEPLOYMENTS
    )


async def test_a_steps_new_resources_go_in_one_insert_numbered_after_the_existing_ones(plane: Plane) -> None:
    """On SQLite a step's new resources are numbered (max id + 1, ...) and sent as one executemany."""
    await plane.signal_urls()  # the first stack's resources are in
    async with plane.rt.sessions() as session:
        before = await session.scalar(select(func.max(ResourceRow.id)))
    assert before is not None
    inserts: list[int] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        if statement.startswith("INSERT INTO resources"):
            inserts.append(len(params) if executemany else 1)

    event.listen(plane.db.sync_engine, "before_cursor_execute", seen)
    try:
        await stacks.create_stack(plane.rt, plane.engine.kick, {"name": "second", "template": template()})
        await plane.wait_generation(1)
        for _ in range(400):  # bounded: 20 s
            async with plane.rt.sessions() as session:
                ids = sorted(await session.scalars(select(ResourceRow.id).where(ResourceRow.id > before)))
            if len(ids) == DEPLOYMENTS + 2:
                break
            await asyncio.sleep(0.05)
    finally:
        event.remove(plane.db.sync_engine, "before_cursor_execute", seen)
    assert ids == list(range(before + 1, before + DEPLOYMENTS + 3))
    assert sum(inserts) == DEPLOYMENTS + 2
    assert len(inserts) < DEPLOYMENTS, inserts  # the ORM alone sends one INSERT per row here
