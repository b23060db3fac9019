"""A full state dir under a running `anneal-agent run`: it waits, never exits.

The state dir is a small tmpfs (root only, like R24). While a deployment's hook runs the
test fills the disk completely and lets the hook finish: the agent cannot record the result
(the ledger's WAL cannot grow), so it keeps it in memory, reports the condition in its
heartbeat and in `anneal-agent status`, and retries. A second deployment published while the
disk is full waits too. Once space is freed both complete, in order, and the agent process
is the one that started (same pid, never restarted).
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from agent import diskfull
from agent.ledger import Ledger
from tests.support.agents import agent_status, enrol_agent, stop_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.disk import fill, mount_tmpfs, unmount
from tests.support.processes import BIN
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

TEMPLATE = one_script_deployment(
    """
    #!/bin/sh
    echo "started $STEP"
    touch "$DIR/started-$STEP"
    while [ ! -e "$DIR/go-$STEP" ]; do sleep 0.1; done
    echo "finished $STEP"
    """,
    params={"dir": "string", "step": "string"},
    inputs={"DIR": "{get_param: dir}", "STEP": "{get_param: step}"},
    server="fullbox",
)


def _reported(cp: ControlPlane) -> dict[str, Any] | None:
    status = cp.api("GET", "/v1/servers/fullbox").body.get("agent_status") or {}
    return status.get("disk_full")


def test_full_state_dir_is_waited_out_in_process(tmp_path: Path) -> None:
    """Disk filled mid-hook: the condition is shown and reported; once freed, both deployments complete, same pid."""
    disk = tmp_path / "disk"
    mount_tmpfs(disk)
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    state = disk / "state"
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 (closed in finally)
    agent = None
    try:
        argv = enrol_agent(cp, "fullbox", state)
        agent = subprocess.Popen(argv, stdout=log, stderr=log)
        assert 201 == cp.create("first", TEMPLATE, params={"dir": str(work), "step": "a"}).status
        wait_until((work / "started-a").exists, "the first hook never started", 120)
        fill(disk, 0)
        (work / "go-a").touch()  # the hook ends on a full disk: its result cannot be recorded
        full = wait_until(
            lambda: agent_status(state).get("disk_full"), "status never showed the full disk", 120
        )
        assert str(state) in full["message"] and "record the result of deployment" in full["message"]
        reported = wait_until(lambda: _reported(cp), "the heartbeat never reported the full disk", 60)
        assert full["message"] == reported["message"]
        text = subprocess.run(
            [str(BIN / "anneal-agent"), "status", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "DISK FULL:" in text and str(state) in text
        assert 201 == cp.create("second", TEMPLATE, params={"dir": str(work), "step": "b"}).status
        time.sleep(3)  # the second document arrives and cannot be kept: nothing of it runs
        assert not (work / "started-b").exists()
        assert "CREATE_IN_PROGRESS" == cp.api("GET", "/v1/stacks/first").body["status"]
        assert agent.poll() is None, "the agent exited on a full disk"

        (disk / "filler").unlink()
        assert "CREATE_COMPLETE" == cp.wait_stack("first", timeout=120)["status"]
        wait_until((work / "started-b").exists, "the second hook never started", 120)
        (work / "go-b").touch()
        assert "CREATE_COMPLETE" == cp.wait_stack("second", timeout=120)["status"]
        wait_until(lambda: _reported(cp) is None, "the control plane still shows the full disk", 120)
        assert agent_status(state).get("disk_full") is None

        first, second = (cp.api("GET", f"/v1/deployments?stack={s}").body[0] for s in ("first", "second"))
        detail = cp.api("GET", f"/v1/deployments/{first['id']}").body
        assert "finished a" in detail["deploy_stdout"] and 0 == detail["deploy_status_code"]
        assert agent.poll() is None and int((state / "agent.pid").read_text()) == agent.pid
        db = sqlite3.connect(state / "ledger.sqlite")
        try:
            assert "ok" == db.execute("PRAGMA integrity_check").fetchone()[0]
            signalled = db.execute(
                "SELECT g.deployment_id FROM outbox o JOIN generations g USING (item_id) ORDER BY o.id"
            ).fetchall()
        finally:
            db.close()
        assert [(first["id"],), (second["id"],)] == signalled  # one signal each, in order
        agent_log = (tmp_path / "agent.log").read_text()
        assert f"state dir {state} is full" in agent_log and "Traceback" not in agent_log
    finally:
        stop_agent(agent)
        log.close()
        stop_control_plane(cp)
        unmount(disk)


def test_agent_started_on_a_full_state_dir_waits_to_open_its_ledger(tmp_path: Path) -> None:
    """`anneal-agent run` started on a full disk says so and waits (no exit, no restart); freed, it runs."""
    disk = tmp_path / "disk"
    mount_tmpfs(disk)
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    state = disk / "state"
    log_path = tmp_path / "agent.log"
    log = open(log_path, "ab")  # noqa: SIM115 (closed in finally)
    agent = None
    try:
        argv = enrol_agent(cp, "fullbox", state)
        fill(disk, 0)
        agent = subprocess.Popen(argv, stdout=log, stderr=log)
        wait_until(
            lambda: "could not open its ledger" in log_path.read_text(), "no line about the full disk", 60
        )
        assert f"state dir {state} is full" in log_path.read_text()
        time.sleep(3)
        assert agent.poll() is None, "the agent exited on a full disk"
        (disk / "filler").unlink()
        assert 201 == cp.create("later", TEMPLATE, params={"dir": str(work), "step": "c"}).status
        wait_until((work / "started-c").exists, "the hook never started once space was back", 120)
        (work / "go-c").touch()
        assert "CREATE_COMPLETE" == cp.wait_stack("later", timeout=120)["status"]
        assert agent.poll() is None and "Traceback" not in log_path.read_text()
    finally:
        stop_agent(agent)
        log.close()
        stop_control_plane(cp)
        unmount(disk)


def test_ledger_write_on_a_full_disk_fails_whole_and_the_next_one_works(tmp_path: Path) -> None:
    """A ledger write that finds the disk full is refused as a full disk and leaves no open transaction."""
    disk = tmp_path / "disk"
    mount_tmpfs(disk)
    ledger = Ledger(disk)
    try:
        ledger.set_state("before", "kept")
        fill(disk, 0)
        refused = []
        for n in range(20):
            try:
                ledger.set_state(f"key{n}", "x" * 5000)
            except Exception as e:
                refused.append(e)
        assert refused and all(diskfull.is_full(e) for e in refused), refused
        (disk / "filler").unlink()
        ledger.set_state("after", "written")  # no "transaction within a transaction" left behind
        assert ("kept", "written") == (ledger.get_state("before"), ledger.get_state("after"))
        check = sqlite3.connect(disk / "ledger.sqlite")
        try:
            assert "ok" == check.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            check.close()
    finally:
        ledger.close()
        unmount(disk)
