"""A signal that arrives while another process holds SQLite's write lock past the busy timeout.

Real processes: `anneal serve` on SQLite with its local agent; the lock is taken by this test
with `BEGIN IMMEDIATE` on the control plane's database file, as a long write transaction of
another process would hold it. The signal route waits out the busy timeout (10 s,
control/store/db.py), answers 503 with Retry-After, and the agent's outbox sends the signal
again after its backoff; it is applied once and the hook ran once (bench/scale_agents.py
does the same in-process at 50,000 deployments). About 18 s, most of it the busy timeout.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

#: Counts its runs, then waits (bounded: 60 s) for the test to open the gate.
GATED = """
echo run >> {dir}/runs
i=0
while [ ! -e {dir}/go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
echo through
"""


@pytest.fixture
def cp(tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane that logs every request with its status (--access-log)."""
    plane = start_control_plane(tmp_path, "--access-log")
    yield plane
    stop_control_plane(plane)


def test_a_signal_refused_while_the_database_is_locked_is_sent_again_and_applied_once(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Write lock held past the busy timeout as the hook ends: 503 (never 500), then resent and applied once."""
    assert 201 == cp.create("locked", one_script_deployment(GATED.format(dir=tmp_path))).status
    wait_until((tmp_path / "runs").exists, "the hook to start", 60)
    holder = sqlite3.connect(cp.data_dir / "anneal.db", timeout=30, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the write lock, as another writer would hold it
        (tmp_path / "go").touch()
        refused = "database unavailable on POST /v1/signal/"
        wait_until(lambda: refused in cp.log.read_text(errors="replace"), "the signal refused as busy", 60)
    finally:
        holder.rollback()
        holder.close()
    cp.settled("locked", "CREATE_COMPLETE", timeout=90)
    (dep,) = cp.api("GET", "/v1/deployments?stack=locked").body
    shown = cp.api("GET", f"/v1/deployments/{dep['id']}").body
    assert ("COMPLETE", "through\n") == (shown["status"], shown["deploy_stdout"])
    assert ["run"] == (
        tmp_path / "runs"
    ).read_text().split()  # the hook ran once: only the signal was sent again
    log = cp.log.read_text(errors="replace")
    answers = re.findall(r'"POST /v1/signal/[^ ]+ HTTP/1.1" (\d+)', log)
    # Refused as busy, then taken (a progress report before the lock may precede both).
    assert "503" in answers and "200" in answers[answers.index("503") :], answers
    assert "500" not in answers and "unhandled error" not in log, log
