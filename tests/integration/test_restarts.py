"""Restarts: the control plane resumes stacks; the agent keeps signals until they are taken."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.agents import agent_status, enrol_agent, stop_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import BIN
from tests.support.waiting import wait_file, wait_until

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  dir: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: standalone}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: DIR}, {name: STEP}]
      outputs: [{name: step}]
      config: |
        #!/bin/sh
        touch "$DIR/started-$STEP"
        while [ ! -e "$DIR/go-$STEP" ]; do sleep 0.1; done
        echo "$STEP" >> "$DIR/runs"
        printf '%s' "$STEP" > "$heat_outputs_path.step"
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {name: "10-first", config: {get_resource: cfg}, server: {get_resource: box},
                 input_values: {DIR: {get_param: dir}, STEP: first}}
  second:
    type: OS::Heat::SoftwareDeployment
    properties: {name: "20-second", config: {get_resource: cfg}, server: {get_resource: box},
                 input_values: {DIR: {get_param: dir},
                                STEP: {list_join: ["-", ["second", {get_attr: [first, step]}]]}}}
outputs:
  last: {value: {get_attr: [second, step]}}
"""

SERVER_ONLY = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: standalone}}
"""


def test_signal_survives_control_plane_outage_and_stack_resumes(tmp_path: Path) -> None:
    """The control plane dies mid-hook; the agent queues the signal, the restarted plane resumes."""
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    agent = None
    try:
        state = tmp_path / "agent-state"
        argv = enrol_agent(cp, "standalone", state)
        with open(tmp_path / "agent.log", "ab") as log:
            agent = subprocess.Popen(argv, stdout=log, stderr=log)
        assert 201 == cp.create("outage", TEMPLATE, params={"dir": str(work)}).status
        wait_file(work / "started-first")
        cp.crash()  # no graceful shutdown: a crash
        (work / "go-first").touch()  # the hook finishes while nobody listens
        wait_until(lambda: len(agent_status(state)["queued_signals"]) == 1, "one signal queued", 30)
        cp = start_control_plane(tmp_path, "--provisioner", "enrol", port=cp.port)
        wait_file(work / "started-second-first")  # runs only once the queued signal has landed
        (work / "go-second-first").touch()
        assert "CREATE_COMPLETE" == cp.wait_stack("outage", timeout=90)["status"]
        assert "second-first" == cp.outputs("outage")["last"]
        assert ["first", "second-first"] == (work / "runs").read_text().split()
    finally:
        stop_agent(agent, 30)
        stop_control_plane(cp)


def _agent_processes(state: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text().split()
        except OSError:
            continue
        if str(state).encode() in cmd and b"run" in cmd and stat[2] != "Z":
            pids.append(int(proc.name))
    return pids


def test_control_plane_killed_mid_stack_resumes_with_one_agent_per_server(tmp_path: Path) -> None:
    """kill -9 of the control plane (local agents): the restart resumes the stack, one agent per dir."""
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path)
    try:
        assert 201 == cp.create("resume", TEMPLATE, params={"dir": str(work)}).status
        wait_file(work / "started-first")
        cp.crash()
        cp = start_control_plane(tmp_path, port=cp.port)
        (work / "go-first").touch()
        wait_file(work / "started-second-first")
        (work / "go-second-first").touch()
        assert "CREATE_COMPLETE" == cp.wait_stack("resume", timeout=90)["status"]
        assert 1 == len(_agent_processes(cp.agent_dir("standalone")))
        assert ["first", "second-first"] == (work / "runs").read_text().split()
    finally:
        stop_control_plane(cp)


def test_second_agent_on_one_state_dir_is_refused(control_plane: ControlPlane, tmp_path: Path) -> None:
    """Two agents on one state dir would race on the ledger: the second exits with a clear error."""
    cp = control_plane
    state = tmp_path / "solo"
    first = subprocess.Popen(
        enrol_agent(cp, "solo", state), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_file(state / "agent.pid")
        second = subprocess.run(
            [str(BIN / "anneal-agent"), "once", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert 2 == second.returncode
        assert f"another agent (pid {first.pid}) is running" in second.stderr
    finally:
        stop_agent(first, 30)


def test_sigterm_lets_the_running_hook_finish_and_signal(tmp_path: Path) -> None:
    """SIGTERM mid-hook: the agent starts nothing new, lets the hook finish, signals it, then exits."""
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    agent = None
    try:
        argv = enrol_agent(cp, "standalone", tmp_path / "agent-state")
        agent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert 201 == cp.create("drain", TEMPLATE, params={"dir": str(work)}).status
        wait_file(work / "started-first")
        agent.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert agent.poll() is None  # still running: waiting for the hook
        (work / "go-first").touch()
        assert 0 == agent.wait(30)
        first = [d for d in cp.api("GET", "/v1/deployments?stack=drain").body if d["name"] == "10-first"]
        assert "COMPLETE" == first[0]["status"]
        assert not (work / "started-second-first").exists()  # nothing new was started
        agent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_file(work / "started-second-first")
        (work / "go-second-first").touch()
        assert "CREATE_COMPLETE" == cp.wait_stack("drain", timeout=60)["status"]
        assert ["first", "second-first"] == (work / "runs").read_text().split()
    finally:
        stop_agent(agent, 30)
        stop_control_plane(cp)


def test_local_agent_that_lost_its_enrolment_answer_enrols_again_after_a_restart(tmp_path: Path) -> None:
    """A crash after the enrolment's commit, before its answer: the restart gives the agent a new token."""
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path)
    try:
        assert 201 == cp.create("lost", SERVER_ONLY).status
        assert "CREATE_COMPLETE" == cp.wait_stack("lost", timeout=60)["status"]
        state = cp.agent_dir("standalone")
        wait_file(state / "agent.pid")
        cp.crash()
        # What the agent holds when its enrolment answer never came: keys and ledger, no config.
        pid = int((state / "agent.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not _agent_processes(state), f"agent {pid} still running", 30)
        (state / "agent.json").unlink()
        (state / "agent.pid").unlink()
        cp = start_control_plane(tmp_path, port=cp.port)
        body = {"template": TEMPLATE, "parameters": {"dir": str(work)}}
        assert 202 == cp.api("PUT", "/v1/stacks/lost", body).status
        wait_file(work / "started-first")
        (work / "go-first").touch()
        wait_file(work / "started-second-first")
        (work / "go-second-first").touch()
        assert "UPDATE_COMPLETE" == cp.wait_stack("lost", timeout=90)["status"]
        assert ["first", "second-first"] == (work / "runs").read_text().split()
    finally:
        stop_control_plane(cp)
