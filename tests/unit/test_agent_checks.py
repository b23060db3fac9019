"""The agent's checks on the host (agent/checks.py): which items it checks, what it keeps, what a beat carries."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

from agent import checks, config, wire
from agent.keys import Unsealer
from agent.ledger import Ledger, ledger_items

BASE = config.AgentConfig(
    url="u", server_id="s", name="n", credential="c", document_url="d", heartbeat_url="h"
)
PROBE = "#!/bin/sh\necho '-wanted +found'\nexit 1\n"


def _item(item_id: str, group: str, options: dict[str, str] | None = None) -> wire.DeploymentItem:
    return wire.DeploymentItem(item_id, f"{item_id}-name", group, "", config="true", options=options)


def _doc(check: int) -> wire.Document:
    items = (
        _item("a", "script", {"check": PROBE}),
        _item("b", "script"),
        _item("c", "mine"),
        _item("d", "script", {"check": PROBE}),
    )
    meta = {i.id: wire.ItemMeta(f"dep-{i.id}", 1, "h", "CREATE", check=check) for i in items}
    return wire.Document(server_id="s", serial=check, issued_at="", deployments=items, meta=meta)


def _checker(tmp_path: Path, woken: list[int]) -> tuple[checks.Checker, wire.Document]:
    hook_dir = tmp_path / "hooks-dir"
    hook_dir.mkdir()
    mine = hook_dir / "mine"
    mine.write_text("#!/bin/sh\ntouch ran\n")
    mine.chmod(stat.S_IRWXU)
    ledger = Ledger(tmp_path)
    doc = _doc(1)
    ledger.accept_document(1, doc.encode(), ledger_items(doc))
    for item_id in ("a", "b", "c"):  # d was never run: it is not applied here
        ledger.mark_started(item_id)
        ledger.mark_finished(item_id, 0, None)
    cfg = BASE.with_overrides(hook_dirs=(str(hook_dir),))
    return checks.Checker(ledger, cfg, tmp_path, Unsealer(tmp_path, "s"), lambda: woken.append(1)), doc


def test_each_item_is_checked_once_per_request_and_the_ledger_stays_as_it_was(tmp_path: Path) -> None:
    """drifted with the probe's diff, unknown without a check, for a hook-dir hook and for what never ran."""
    woken: list[int] = []
    checker, doc = _checker(tmp_path, woken)
    before = [e.__dict__ for e in checker.ledger.entries()]
    asyncio.run(checker.run_due(doc, lambda: False))
    results = {r["item"]: r for r in checker.unsent()}
    assert {"a": "drifted", "b": "unknown", "c": "unknown", "d": "unknown"} == {
        k: v["state"] for k, v in results.items()
    }
    assert "-wanted +found\n" == results["a"]["diff"]
    assert "no check program" in results["b"]["reason"]
    assert "not one of Anneal's built-in hooks" in results["c"]["reason"]
    assert "not applied here (ledger: received)" in results["d"]["reason"]
    assert not (tmp_path / "ran").exists()  # the hook-dir hook never ran
    assert before == [e.__dict__ for e in checker.ledger.entries()]
    assert 4 == len(woken)
    asyncio.run(checker.run_due(doc, lambda: False))  # the same request again: nothing runs
    assert 4 == len(woken)


def test_results_stay_until_acknowledged_and_a_beat_carries_a_bounded_share(tmp_path: Path) -> None:
    """An answer acknowledging nothing wakes nothing; acknowledged results go; big ones take several beats."""
    woken: list[int] = []
    checker, doc = _checker(tmp_path, woken)
    asyncio.run(checker.run_due(doc, lambda: False))
    woken.clear()
    checker.acknowledged({"serial": 3})  # an older control plane: nothing acknowledged
    assert (4, []) == (len(checker.unsent()), woken)
    checker.acknowledged({"checks": ["a:1", "b:1", "c:9"]})
    assert ["c", "d"] == sorted(r["item"] for r in checker.unsent()) and [1] == woken
    big = {f"x{i}": {"item": f"x{i}", "check": 1, "diff": "x" * 16000, "at": i} for i in range(6)}
    checker.ledger.set_state(checks.UNSENT, json.dumps(big))
    first = checker.unsent()
    assert 0 < len(first) < 6 and sum(len(json.dumps(r)) for r in first) <= checks.BEAT_BYTES
