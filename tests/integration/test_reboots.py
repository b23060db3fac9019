"""R04: simulated reboots of the agent's host, and a rebuilt server.

A reboot: SIGKILL the agent, delete its /run-equivalent (its TMPDIR) and every cache in
the state dir (hook work dirs, teed output, pid file), keep the ledger, start again. Half
of the reboots happen while a finished deployment's signal is still unacknowledged (the
control plane is down). Nothing finished may run again; every signal must arrive.
R04_REBOOTS sets the count (20 for the catalogue's figure; CI runs 4, two of each kind, printing figures).

A rebuilt server (the whole state dir lost, a new agent key) is detected by the control
plane at enrolment, which re-runs every deployment as on a new server and says so.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.agents import agent_status, enrol_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import BIN, stop_process
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

REBOOTS = int(os.environ.get("R04_REBOOTS", "4"))
TEMPLATE = one_script_deployment(
    """
    #!/bin/sh
    echo "$STEP" >> "$DIR/starts-$STEP"
    sleep 1
    printf '%s' "$STEP" > "$heat_outputs_path.step"
    echo "$STEP" >> "$DIR/ends-$STEP"
    """,
    params={"dir": "string", "step": "string"},
    inputs={"DIR": "{get_param: dir}", "STEP": "{get_param: step}"},
    outputs=["step"],
    server="r04box",
)


class Host:
    """The agent's machine: its process, its /run, its caches."""

    def __init__(self, tmp: Path, argv: list[str], state: Path) -> None:
        self.argv, self.state, self.run_dir = argv, state, tmp / "run"
        self.log = open(tmp / "agent.log", "ab")  # noqa: SIM115 (closed by stop)
        self.proc: subprocess.Popen[bytes] | None = None

    def boot(self) -> None:
        self.run_dir.mkdir(exist_ok=True)
        env = {**os.environ, "TMPDIR": str(self.run_dir)}
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log, env=env)

    def crash(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def reboot(self) -> None:
        self.crash()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        for cache in ("hooks", "output"):
            shutil.rmtree(self.state / cache, ignore_errors=True)
        (self.state / "agent.pid").unlink(missing_ok=True)
        self.boot()

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


@pytest.mark.catalogue("R04")
def test_reboots_lose_no_signal_and_rerun_nothing(tmp_path: Path) -> None:
    """Host reboots (agent killed, /run and caches wiped) lose no queued signal and run nothing again."""
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    port = cp.port
    state = tmp_path / "state"
    host = Host(tmp_path, enrol_agent(cp, "r04box", state), state)
    figures = {
        "reboots": 0,
        "with_unacked_signal": 0,
        "lost_signals": 0,
        "reruns": 0,
        "serial_regressions": 0,
    }
    serials: list[int] = []
    try:
        host.boot()
        for i in range(REBOOTS):
            step = f"s{i}"
            assert 201 == cp.create(f"r04-{i}", TEMPLATE, params={"dir": str(work), "step": step}).status
            if i % 2:  # the control plane goes away while the hook runs: the signal stays queued
                wait_until((work / f"starts-{step}").exists, f"{step} never started", 60, 0.05)
                cp.crash()
                wait_until((work / f"ends-{step}").exists, f"{step} never ended", 60, 0.05)
                wait_until(
                    lambda: len(agent_status(state)["queued_signals"]) >= 1, "signal never queued", 60, 0.05
                )
                host.reboot()
                figures["with_unacked_signal"] += 1
                cp = start_control_plane(tmp_path, "--provisioner", "enrol", port=port)
            else:
                assert cp.wait_stack(f"r04-{i}", timeout=90)["status"] == "CREATE_COMPLETE"
                host.reboot()
            figures["reboots"] += 1
            serials.append(agent_status(state)["document"]["serial"])
        for i in range(REBOOTS):
            stack = cp.wait_stack(f"r04-{i}", timeout=90)
            figures["lost_signals"] += (
                stack["status"] != "CREATE_COMPLETE" or cp.outputs(f"r04-{i}")["step"] != f"s{i}"
            )
        wait_until(lambda: not agent_status(state)["queued_signals"], "signals still queued", 60, 0.05)
        time.sleep(3)  # a last poll after the last reboot: nothing may start again
        for i in range(REBOOTS):
            figures["reruns"] += len((work / f"starts-s{i}").read_text().split()) - 1
        figures["serial_regressions"] = sum(b < a for a, b in itertools.pairwise(serials))
    finally:
        print(f"\nR04 figures: {figures}")
        host.stop()
        stop_control_plane(cp)
    assert figures["reboots"] == REBOOTS
    assert 0 == figures["lost_signals"] and 0 == figures["reruns"] and 0 == figures["serial_regressions"]


def test_lost_state_dir_is_detected_and_the_control_plane_reruns_everything(tmp_path: Path) -> None:
    """A server re-imaged with new keys is detected at enrolment and re-run; the same keys again are not."""
    work = tmp_path / "work"
    work.mkdir()
    cp: ControlPlane = start_control_plane(tmp_path, "--provisioner", "enrol")
    state = tmp_path / "state"
    host = Host(tmp_path, enrol_agent(cp, "r04box", state), state)
    try:
        host.boot()
        assert 201 == cp.create("rebuilt", TEMPLATE, params={"dir": str(work), "step": "only"}).status
        assert cp.wait_stack("rebuilt", timeout=90)["status"] == "CREATE_COMPLETE"
        host.crash()
        shutil.rmtree(state)  # the server is re-imaged: ledger, keys, credential all gone
        token = cp.cli("server", "token", "r04box", "--format", "json")
        assert token.returncode == 0, token.stderr
        enrol = subprocess.run(
            [
                str(BIN / "anneal-agent"),
                "enrol",
                "--url",
                cp.url,
                f"--token={json.loads(token.stdout)['enrol_token']}",
                "--state-dir",
                str(state),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert enrol.returncode == 0, enrol.stderr
        server = cp.api("GET", "/v1/servers/r04box").body
        assert len(server["rebuilds"]) == 1
        record = server["rebuilds"][0]
        assert record["decision"] == "re-run every deployment on it as on a new server"
        assert record["previous_sign_key"] != record["new_sign_key"]
        assert [r["generation"] for r in record["rerun"]] == [2]
        host.boot()
        dep_id = record["rerun"][0]["deployment_id"]
        wait_until(
            lambda: cp.api("GET", f"/v1/deployments/{dep_id}").body["status"] == "COMPLETE",
            "no re-run",
            90,
            0.05,
        )
        detail = cp.api("GET", f"/v1/deployments/{dep_id}").body
        assert detail["generation"] == 2 and detail["output_values"] == {"step": "only"}
        assert (work / "starts-only").read_text().split() == ["only", "only"]  # ran again, on purpose
        events = cp.api("GET", "/v1/stacks/rebuilt/events").body
        assert any("was rebuilt" in e.get("reason", e.get("resource_status_reason", "")) for e in events), (
            events
        )
        # Enrolling again with the same keys (same state dir) is not a rebuild.
        again = json.loads(cp.cli("server", "token", "r04box", "--format", "json").stdout)["enrol_token"]
        host.crash()
        (state / "agent.json").unlink()
        same = subprocess.run(
            [
                str(BIN / "anneal-agent"),
                "enrol",
                "--url",
                cp.url,
                f"--token={again}",
                "--state-dir",
                str(state),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert same.returncode == 0, same.stderr
        assert len(cp.api("GET", "/v1/servers/r04box").body["rebuilds"]) == 1
    finally:
        host.stop()
        stop_control_plane(cp)
