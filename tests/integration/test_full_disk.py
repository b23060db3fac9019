"""R24: the agent's state dir on a full disk.

The state dir is a small tmpfs the test mounts (root only: the test fails, naming why, if it
cannot mount). Each event fills it to a random few bytes short of full, publishes a new
deployment whose script writes an artefact into that same disk and reports its size, and
runs `anneal-agent once`, which gets through or stops with one line naming the state dir
(never a traceback); then frees the space and runs it again. Checked after every step:
the ledger passes SQLite's integrity check and the JSON state files parse (0 corrupted state
files); every status-0 signal matches an artefact that was really written whole (0 false
COMPLETE); at the end every deployment got exactly one signal (100 % recover).
R24_EVENTS sets the count (100 for the catalogue's figure; CI runs 20, printing figures).

heat-engine cannot run here: the agent runs in --heat-compat mode against the small real
aiohttp server of tests/support/heat.py, which stands in for it and records the signals.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.disk import SIZE, fill, mount_tmpfs, unmount
from tests.support.heat import FakeHeat, run_agent

pytestmark = pytest.mark.catalogue("R24")

EVENTS = int(os.environ.get("R24_EVENTS", "20"))
ARTEFACT = 24 * 1024
SCRIPT = (
    "#!/bin/sh\nset -e\n"
    'head -c {size} /dev/zero > "$DIR/artefact-$N.tmp"\n'
    'mv "$DIR/artefact-$N.tmp" "$DIR/artefact-$N"\n'
    "wc -c < \"$DIR/artefact-$N\" | tr -d ' \\n' > $heat_outputs_path.size\n"
)


def _item(base: str, n: int, disk: Path) -> dict[str, Any]:
    return {
        "id": f"00000000-0000-4000-8000-{n:012d}",
        "name": f"{n:04d}_write",
        "group": "script",
        "creation_time": "2026-11-22T04:00:00Z",
        "options": None,
        "config": SCRIPT.format(size=ARTEFACT),
        "outputs": [{"name": "size", "type": "String", "error_output": False}],
        "inputs": [
            {"name": "DIR", "type": "String", "value": str(disk / "work")},
            {"name": "N", "type": "String", "value": str(n)},
            {"name": "deploy_signal_transport", "type": "String", "value": "CFN_SIGNAL"},
            {"name": "deploy_signal_id", "type": "String", "value": f"{base}/v1/signal/dep-{n}"},
            {"name": "deploy_signal_verb", "type": "String", "value": "POST"},
        ],
    }


def _check_state(state: Path, problems: list[str], when: str) -> None:
    db = sqlite3.connect(state / "ledger.sqlite")
    try:
        result = db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()
    if result != "ok":
        problems.append(f"{when}: ledger integrity: {result}")
    for name in ("heat-compat.json",):
        try:
            json.loads((state / name).read_text())
        except (OSError, ValueError) as e:
            problems.append(f"{when}: {name}: {e}")


async def _once(*args: str) -> tuple[int, str]:
    rc, _, err = await run_agent("once", *args, timeout=180)
    return rc, err


async def test_agent_on_a_full_disk_loses_nothing_and_resumes(tmp_path: Path) -> None:
    """On a full disk the agent stops with one line, corrupts nothing, fakes no COMPLETE, recovers all."""
    rng = random.Random(os.environ.get("R24_SEED", "r24"))
    disk = tmp_path / "disk"
    mount_tmpfs(disk)
    heat = FakeHeat()
    await heat.server.start_server()
    figures = {
        "events": 0,
        "full_runs": 0,
        "corrupted_state_files": 0,
        "false_complete": 0,
        "failed_on_full_disk": 0,
        "recovered": 0,
        "tracebacks": 0,
        "stopped_saying_disk_full": 0,
    }
    problems: list[str] = []
    try:
        base = str(heat.server.make_url("")).rstrip("/")
        state = disk / "state"
        (disk / "work").mkdir()
        hooks = tmp_path / "hooks"
        hooks.mkdir()
        heat.document = {"deployments": []}
        common = ["--state-dir", str(state), "--hook-dir", str(hooks)]
        rc, err = await _once("--heat-compat", "--metadata-url", f"{base}/metadata/doc.json", *common)
        assert rc == 0, err
        for n in range(EVENTS):
            heat.document = {"deployments": [*heat.document["deployments"], _item(base, n, disk)]}
            fill(disk, rng.choice([0, 512, 4096, 16384, 65536, 131072]))
            rc, err = await _once(*common)
            figures["full_runs"] += 1
            # A full disk ends `once` with one line naming the state dir, never a traceback.
            if "Traceback" in err:
                figures["tracebacks"] += 1
                problems.append(f"event {n}: traceback on a full disk: {err[-2000:]}")
            elif rc == 2:
                figures["stopped_saying_disk_full"] += f"anneal-agent: state dir {state} is full" in err
            (disk / "filler").unlink()  # (SQLite cannot even open a WAL database on a full disk)
            _check_state(state, problems, f"event {n} (written on a full disk)")
            rc, err = await _once(*common)
            _check_state(state, problems, f"event {n} (space back)")
            figures["events"] += 1
        # Every deployment has exactly one result; a COMPLETE one really wrote its artefact.
        by_dep: dict[str, list[dict[str, Any]]] = {}
        for _, path, body, _ in heat.signals:
            by_dep.setdefault(path.rsplit("/", 1)[1], []).append(body)
        for n in range(EVENTS):
            got = by_dep.get(f"dep-{n}", [])
            if len(got) != 1:
                problems.append(f"deployment {n}: {len(got)} signals")
                continue
            figures["recovered"] += 1
            body = got[0]
            if body["deploy_status_code"] == 0:
                artefact = disk / "work" / f"artefact-{n}"
                if (
                    not artefact.exists()
                    or artefact.stat().st_size != ARTEFACT
                    or body.get("size") != str(ARTEFACT)
                ):
                    figures["false_complete"] += 1
                    problems.append(f"deployment {n}: COMPLETE but artefact {artefact} is not whole: {body}")
            else:
                figures["failed_on_full_disk"] += 1
        figures["corrupted_state_files"] = sum("integrity" in p or ".json" in p for p in problems)
    finally:
        print(f"\nR24 figures ({SIZE} tmpfs): {figures}")
        await heat.server.close()
        unmount(disk)
    assert [] == problems
    assert figures["false_complete"] == 0 and figures["corrupted_state_files"] == 0
    assert figures["recovered"] == EVENTS
    assert figures["stopped_saying_disk_full"] >= 1, figures  # the disk really was full for some runs
