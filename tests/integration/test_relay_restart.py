"""The relay killed with -9 while it holds signals on disk: after a restart each reaches the control plane once.

A real control plane, a real `anneal-agent relay` and real agents enrolled through it,
all on loopback. The relay's upstream is a TCP front (tests/integration/proxy.py) that the
test cuts, so the agents' results are spooled on the relay's disk; the relay is then
killed with SIGKILL (by its PID), upstream comes back, and the relay is started again on
the same state dir and port.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, ControlPlane, free_port, start_control_plane, stop_control_plane
from tests.integration.proxy import Front

pytestmark = pytest.mark.slow
SERVERS = 3


def template(names: list[str], go: Path, round_: int) -> str:
    deployments = "".join(
        f"""
  dep{i}:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: cfg}}
      server: {name}
      input_values: {{GO: "{go}", ROUND: "{round_}"}}
"""
        for i, name in enumerate(names)
    )
    outputs = "".join(f"\n  out{i}: {{value: {{get_attr: [dep{i}, said]}}}}" for i in range(len(names)))
    return f"""
heat_template_version: rocky
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{{name: GO}}, {{name: ROUND}}]
      outputs: [{{name: said}}]
      config: |
        #!/bin/sh
        i=0
        while [ ! -e "$GO" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
        printf 'round %s' "$ROUND" > "$heat_outputs_path.said"
{deployments}
outputs:{outputs}
"""


def start_relay(tmp: Path, port: int, upstream: str) -> subprocess.Popen[bytes]:
    log = open(tmp / "relay.log", "ab")  # noqa: SIM115 - the process owns it
    proc = subprocess.Popen(
        [
            str(BIN / "anneal-agent"),
            "relay",
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            upstream,
            "--state-dir",
            str(tmp / "relay"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/relay/status", timeout=1)
            return proc
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, (tmp / "relay.log").read_text()
            time.sleep(0.1)


def relay_status(port: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/relay/status", timeout=10) as resp:
        return dict(json.loads(resp.read()))


def wait(check, what: str, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def started(state: Path, generation: int) -> bool:
    path = state / "ledger.sqlite"
    if not path.exists():
        return False
    db = sqlite3.connect(path)
    try:
        row = db.execute(
            "SELECT count(*) FROM generations WHERE generation = ? AND state != 'received'", (generation,)
        ).fetchone()
    finally:
        db.close()
    return bool(row[0])


def result_events(cp: ControlPlane) -> Counter[tuple[str, int]]:
    events = cp.api("GET", "/v1/stacks/rr/events").body
    return Counter(
        (e["deployment_id"], e["generation"])
        for e in events
        if e["deployment_id"] and e["status"] == "COMPLETE"
    )


def test_relay_killed_with_spooled_signals_delivers_each_once_after_restart(tmp_path: Path):
    cp = start_control_plane(tmp_path, "--provisioner=enrol")
    front = Front([int(cp.url.rsplit(":", 1)[1])])
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    relay = start_relay(tmp_path, port, front.url)
    names = [f"rr-{i}" for i in range(SERVERS)]
    states = {n: tmp_path / "agents" / n for n in names}
    try:
        for name in names:
            token = cp.api("POST", "/v1/servers", {"name": name}).body["enrol_token"]
            procs.append(
                subprocess.Popen(
                    [
                        str(BIN / "anneal-agent"),
                        "run",
                        "--url",
                        f"http://127.0.0.1:{port}",
                        "--poll-wait=2",
                        "--state-dir",
                        str(states[name]),
                    ],
                    stdout=open(tmp_path / f"{name}.log", "ab"),  # noqa: SIM115
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "ANNEAL_ENROL_TOKEN": token},
                )
            )
        go = tmp_path / "go"
        go.touch()
        assert 201 == cp.create("rr", template(names, go, 1)).status
        assert "CREATE_COMPLETE" == cp.wait_stack("rr", timeout=180)["status"]

        # Round 2: every hook starts, then upstream is cut and the hooks finish: results spool.
        go.unlink()
        body = {"template": template(names, go, 2)}
        assert 202 == cp.api("PUT", "/v1/stacks/rr", body).status
        wait(lambda: all(started(s, 2) for s in states.values()), "every agent to start generation 2")
        front.route([free_port()])  # nothing listens there: the relay's upstream is gone
        go.touch()
        wait(lambda: relay_status(port)["spooled_now"] >= SERVERS, "the results spooled on the relay")
        spooled = sorted(p.name for p in (tmp_path / "relay" / "spool").iterdir())
        assert len(spooled) >= SERVERS
        relay.send_signal(signal.SIGKILL)
        relay.wait(10)
        assert spooled == sorted(
            p.name for p in (tmp_path / "relay" / "spool").iterdir()
        )  # all still on disk
        assert "UPDATE_IN_PROGRESS" == cp.api("GET", "/v1/stacks/rr").body["status"]

        front.route([int(cp.url.rsplit(":", 1)[1])])
        relay = start_relay(tmp_path, port, front.url)
        assert "UPDATE_COMPLETE" == cp.wait_stack("rr", timeout=180)["status"]
        assert {f"out{i}": "round 2" for i in range(SERVERS)} == cp.outputs("rr")
        wait(lambda: relay_status(port)["spooled_now"] == 0, "the spool emptied")
        assert [] == list((tmp_path / "relay" / "refused").iterdir())
        events = result_events(cp)
        assert {1} == set(events.values())  # one result per generation: none lost, none twice
        assert 2 * SERVERS == len(events)
        print(
            f"\nrelay restart: {len(spooled)} signals spooled before kill -9, delivered after restart {relay_status(port)}"
        )
    finally:
        for p in [*procs, relay]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [*procs, relay]:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        front.stop()
        stop_control_plane(cp)
