"""How long `anneal serve` takes to stop (SIGTERM) with its local agents, against an idle one.

The control plane runs with the ``local`` provisioner and the agents' default long-poll,
as `make demo` runs it. A stack puts one script deployment on each of SERVERS servers
(one local agent each); once it is complete the bench sends SIGTERM and times until the
control plane has exited and every agent process with it. The baseline, measured in the
same run, stops a control plane that has no agents. Run: `.venv/bin/python -m bench.serve_stop`.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from pathlib import Path

from bench.harness import deployments_template, start_plane, stop_leftover_agents
from tests.support.controlplane import ControlPlane
from tests.support.processes import stop_process

SERVERS = 4
ROUNDS = 3


def _agent_pids(cp: ControlPlane) -> list[int]:
    pids = []
    for pid_file in (cp.data_dir / "agents").glob("*/agent.pid"):
        pid = int(pid_file.read_text())
        if Path(f"/proc/{pid}").exists():
            pids.append(pid)
    return pids


def _stop_seconds(cp: ControlPlane, agents: list[int]) -> float:
    """SIGTERM the control plane; seconds until it and *agents* have all exited."""
    began = time.monotonic()
    cp.proc.send_signal(signal.SIGTERM)
    cp.proc.wait(60)
    while any(Path(f"/proc/{pid}").exists() and _running(pid) for pid in agents):
        if time.monotonic() - began > 60:
            raise AssertionError(f"agents {agents} still running 60 s after SIGTERM")
        time.sleep(0.01)
    return time.monotonic() - began


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def one_round(work: Path, with_agents: bool) -> float:
    work.mkdir(parents=True)
    cp = start_plane(work, extra=("--provisioner", "local"))
    try:
        agents: list[int] = []
        if with_agents:
            names = [f"stop-{i}" for i in range(SERVERS)]
            template = json.dumps(deployments_template(names, 1, "x", transport="HTTP"))
            assert cp.create("stop", template).status == 201
            assert cp.wait_stack("stop", 120)["status"] == "CREATE_COMPLETE"
            agents = _agent_pids(cp)
            assert len(agents) == SERVERS, agents
        return _stop_seconds(cp, agents)
    finally:
        stop_process(cp.proc)
        stop_leftover_agents(cp.data_dir / "agents")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="anneal-stop-") as tmp:
        base = [one_round(Path(tmp) / f"idle{i}", False) for i in range(ROUNDS)]
        full = [one_round(Path(tmp) / f"agents{i}", True) for i in range(ROUNDS)]
    b, f = max(base), max(full)
    print(
        f"serve stop, no agents (baseline): worst of {ROUNDS} {b:.2f} s  ({', '.join(f'{x:.2f}' for x in base)})"
    )
    print(
        f"serve stop, {SERVERS} local agents:    worst of {ROUNDS} {f:.2f} s  ({', '.join(f'{x:.2f}' for x in full)})"
    )
    print(f"ratio: {f / b:.1f}x the baseline")


if __name__ == "__main__":
    main()
