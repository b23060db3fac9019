"""The relay killed with -9 while it holds signals on disk: after a restart each reaches the control plane once.

A real control plane, a real `anneal-agent relay` and real agents enrolled through it,
all on loopback. The relay's upstream is a TCP front (tests/support/proxy.py) that the
test cuts, so the agents' results are spooled on the relay's disk; the relay is then
killed with SIGKILL (by its PID), upstream comes back, and the relay is started again on
the same state dir and port.
"""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

from tests.support.agents import start_agent, started
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import free_port, stop_all
from tests.support.proxy import Front
from tests.support.relay import relay_status, start_relay
from tests.support.templates import gated_per_server
from tests.support.waiting import wait_until

SERVERS = 3


def result_events(cp: ControlPlane) -> Counter[tuple[str, int]]:
    events = cp.api("GET", "/v1/stacks/rr/events").body
    return Counter(
        (e["deployment_id"], e["generation"])
        for e in events
        if e["deployment_id"] and e["status"] == "COMPLETE"
    )


def test_relay_killed_with_spooled_signals_delivers_each_once_after_restart(tmp_path: Path) -> None:
    """A relay killed -9 holding spooled signals delivers each exactly once after its restart."""
    cp = start_control_plane(tmp_path, "--provisioner=enrol")
    front = Front([cp.port])
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    relay = start_relay(tmp_path, port, front.url)
    names = [f"rr-{i}" for i in range(SERVERS)]
    states = {n: tmp_path / "agents" / n for n in names}
    try:
        relayed = f"http://127.0.0.1:{port}"
        for name in names:
            procs.append(
                start_agent(cp, name, states[name], tmp_path / f"{name}.log", url=relayed, poll_wait=2)
            )
        go = tmp_path / "go"
        go.touch()
        assert 201 == cp.create("rr", gated_per_server(names, go, 1)).status
        assert "CREATE_COMPLETE" == cp.wait_stack("rr", timeout=180)["status"]

        # Round 2: every hook starts, then upstream is cut and the hooks finish: results spool.
        go.unlink()
        body = {"template": gated_per_server(names, go, 2)}
        assert 202 == cp.api("PUT", "/v1/stacks/rr", body).status
        wait_until(
            lambda: all(started(s, 2) for s in states.values()), "every agent to start generation 2", 120
        )
        front.route([free_port()])  # nothing listens there: the relay's upstream is gone
        go.touch()
        wait_until(
            lambda: relay_status(port)["spooled_now"] >= SERVERS, "the results spooled on the relay", 120
        )
        spooled = sorted(p.name for p in (tmp_path / "relay" / "spool").iterdir())
        assert len(spooled) >= SERVERS
        relay.send_signal(signal.SIGKILL)
        relay.wait(10)
        assert spooled == sorted(
            p.name for p in (tmp_path / "relay" / "spool").iterdir()
        )  # all still on disk
        assert "UPDATE_IN_PROGRESS" == cp.api("GET", "/v1/stacks/rr").body["status"]

        front.route([cp.port])
        relay = start_relay(tmp_path, port, front.url)
        assert "UPDATE_COMPLETE" == cp.wait_stack("rr", timeout=180)["status"]
        assert {f"out{i}": "round 2" for i in range(SERVERS)} == cp.outputs("rr")
        wait_until(lambda: relay_status(port)["spooled_now"] == 0, "the spool emptied", 120)
        assert [] == list((tmp_path / "relay" / "refused").iterdir())
        events = result_events(cp)
        assert {1} == set(events.values())  # one result per generation: none lost, none twice
        assert 2 * SERVERS == len(events)
        print(
            f"\nrelay restart: {len(spooled)} signals spooled before kill -9, delivered after restart {relay_status(port)}"
        )
    finally:
        stop_all([*procs, relay])
        front.stop()
        stop_control_plane(cp)
