"""The agent's run-once ledger and signal outbox."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent.errors import ConfigError
from agent.ledger import LEDGER_FILE, MIGRATIONS, Ledger, Outgoing
from tests.support import release


def _state(ledger: Ledger, item_id: str) -> str:
    entry = ledger.entry(item_id)
    assert entry is not None, f"{item_id} is not in the ledger"
    return entry.state


def test_generation_states_survive_reopen(tmp_path):
    """received -> started -> finished -> signalled, kept across a new Ledger (a restart)."""
    ledger = Ledger(tmp_path)
    ledger.accept_document(
        3,
        b"{}",
        [
            {
                "item_id": "i1",
                "deployment_id": "d",
                "generation": 1,
                "name": "n",
                "hash": "h",
                "action": "CREATE",
            }
        ],
    )
    assert "received" == _state(ledger, "i1")
    ledger.mark_started("i1")
    ledger.mark_finished("i1", 0, Outgoing(0, "i1", "http://x/s", "POST", b"{}", 0))
    ledger.close()
    again = Ledger(tmp_path)
    assert "finished" == _state(again, "i1")
    assert "3" == again.get_state("serial")
    (out,) = again.due(now=10**12)
    again.delivered(out, "200")
    assert "signalled" == _state(again, "i1")
    assert 0 == again.pending_count()


def test_started_but_not_finished_is_interrupted(tmp_path):
    """A generation left in `started` is reported by interrupted()."""
    ledger = Ledger(tmp_path)
    ledger.mark_started("i2")
    assert ["i2"] == [e.item_id for e in ledger.interrupted()]


def test_retry_later_postpones_and_counts(tmp_path):
    """A failed delivery stays queued with a later due time and one more attempt."""
    ledger = Ledger(tmp_path)
    ledger.mark_started("i3")
    ledger.mark_finished("i3", 1, Outgoing(0, "i3", "http://x", "POST", b"{}", 0))
    (out,) = ledger.due(now=10**12)
    ledger.retry_later(out, 3600, "503")
    assert [] == ledger.due(now=0)
    assert 1 == ledger.due(now=10**12)[0].attempts
    assert 1 == ledger.pending_count()


def test_outbox_keeps_order(tmp_path):
    """Signals are delivered in the order they were queued."""
    ledger = Ledger(tmp_path)
    for n in range(5):
        ledger.mark_started(f"i{n}")
        ledger.mark_finished(f"i{n}", 0, Outgoing(0, f"i{n}", "http://x", "POST", b"{}", 0))
    assert [f"i{n}" for n in range(5)] == [o.item_id for o in ledger.due(now=10**12)]


def _raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_ledger_of_the_previous_release_keeps_every_entry_and_its_unsent_signal(tmp_path):
    """A ledger release 36f815b's agent wrote is upgraded on open and still holds every generation and queued signal."""
    state = tmp_path / "web-2"
    shutil.copytree(release.FIXTURE / "agents" / "web-2", state)
    path = state / LEDGER_FILE
    assert [(0,)] == _raw(path, "PRAGMA user_version")
    rows = _raw(
        path,
        "SELECT item_id, deployment_id, generation, name, hash, action, state, status_code, note"
        " FROM generations ORDER BY received_at, name",
    )
    ledger = Ledger(state)
    try:
        assert rows == [tuple(vars(e).values()) for e in ledger.entries()]
        assert ["signalled", "signalled", "finished"] == [e.state for e in ledger.entries()]
        pending = next(d for d in release.expected()["deployments"] if d["status"] == "IN_PROGRESS")
        (queued,) = ledger.pending()
        assert f"/v1/signal/{pending['id']}/1?sig=" in queued["url"]
        assert [(len(MIGRATIONS),)] == _raw(path, "PRAGMA user_version")
    finally:
        ledger.close()


def test_ledger_written_by_a_newer_agent_is_refused(tmp_path):
    """A ledger at a version this agent does not know is refused by name, never written to."""
    Ledger(tmp_path).close()
    db = sqlite3.connect(tmp_path / LEDGER_FILE)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(ConfigError, match="written by a newer agent"):
        Ledger(tmp_path)
