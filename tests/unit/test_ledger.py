"""The agent's run-once ledger and signal outbox."""

from __future__ import annotations

from agent.ledger import Ledger, Outgoing


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
