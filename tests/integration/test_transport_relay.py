"""RELAY transport: the control plane moves a live server's agent onto a relay and back, mid-stack.

A real `anneal serve --relay-url`, a real `anneal-agent relay` and a real agent enrolled
straight with the control plane, all on loopback. Each round's hook waits on a gate
file (`gated_per_server` of tests/support/templates.py); the server is moved (HTTP -> RELAY with `anneal server transport`, RELAY -> HTTP
with the API) while a hook runs. Every generation completes once with its output, no
signal is refused or lost, and the control plane's access log (which records the
relay's `Via` header) shows the agent's document polls and signals coming through the
relay while it is on RELAY, and straight again after.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path

from tests.support.agents import agent_status, enrol_agent, ledger_state, started, stop_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import free_port, stop_process
from tests.support.relay import relay_status, start_relay
from tests.support.templates import gated_per_server
from tests.support.waiting import wait_until

AGENT_ROUTE = re.compile(r'"\w+ /v1/(agent/document|signal/)')


def agent_kind(state: Path) -> str:
    raw = ledger_state(state, "transport")
    return str(json.loads(raw)["kind"]) if raw else "HTTP"


def agent_lines(cp: ControlPlane, start: int) -> list[str]:
    lines = cp.log.read_text()[start:].splitlines()
    return [line for line in lines if "control.access" in line and AGENT_ROUTE.search(line)]


def test_a_live_server_moved_http_relay_http_mid_hook_loses_nothing(tmp_path: Path) -> None:
    """A server moved HTTP -> RELAY -> HTTP while its hooks run loses, repeats and refuses no signal."""
    relay_port = free_port()
    relay_url = f"http://127.0.0.1:{relay_port}"
    cp = start_control_plane(tmp_path, "--provisioner=enrol", "--access-log", f"--relay-url={relay_url}")
    relay = start_relay(tmp_path, relay_port, cp.url)
    state, go = tmp_path / "agent", tmp_path / "go"
    agent = None
    try:
        argv = enrol_agent(cp, "rl-box", state)  # straight with the control plane, on HTTP
        with open(tmp_path / "agent.log", "ab") as log:
            agent = subprocess.Popen([*argv, "--heartbeat-interval=1"], stdout=log, stderr=subprocess.STDOUT)

        # Round 1 on HTTP; moved to RELAY while its hook runs.
        assert 201 == cp.create("rl", gated_per_server(["rl-box"], go, 1)).status
        wait_until(lambda: started(state, 1), "generation 1 to start", 120)
        moved = cp.cli("server", "transport", "rl-box", "RELAY", "-f", "json")
        assert 0 == moved.returncode, moved.stderr
        assert "RELAY" == json.loads(moved.stdout)["transport"]
        wait_until(
            lambda: agent_kind(state) == "RELAY", "the agent to take the document naming the relay", 120
        )
        on_relay = len(cp.log.read_text())
        shown = agent_status(state)["transport"]
        assert {"kind": "RELAY long-poll", "document_url": f"{relay_url}/v1/agent/document"} == shown
        go.touch()
        assert "CREATE_COMPLETE" == cp.wait_stack("rl", timeout=180)["status"]
        assert {"out0": "round 1"} == cp.outputs("rl")

        # Round 2 entirely on RELAY.
        go.unlink()
        assert 202 == cp.api("PUT", "/v1/stacks/rl", {"template": gated_per_server(["rl-box"], go, 2)}).status
        wait_until(lambda: started(state, 2), "generation 2 to start", 120)
        go.touch()
        assert "UPDATE_COMPLETE" == cp.wait_stack("rl", timeout=180)["status"]
        assert {"out0": "round 2"} == cp.outputs("rl")
        server_id = cp.api("GET", "/v1/servers/rl-box").body["id"]
        wait_until(
            lambda: f"server {server_id} switched to RELAY" in cp.log.read_text(),
            "the control plane to see the agent on the relay (its heartbeat through it)",
            120,
        )
        relayed = agent_lines(cp, on_relay)
        assert any("/v1/agent/document" in line for line in relayed), relayed
        signals = [line for line in relayed if "/v1/signal/" in line]
        assert len(signals) >= 2, relayed  # the results of generations 1 and 2
        assert [] == [line for line in relayed if "via=1.1 anneal-relay" not in line]
        assert relay_status(relay_port)["forwarded"] >= 2

        # Round 3: back to HTTP while its hook runs; round 4 on HTTP.
        go.unlink()
        assert 202 == cp.api("PUT", "/v1/stacks/rl", {"template": gated_per_server(["rl-box"], go, 3)}).status
        wait_until(lambda: started(state, 3), "generation 3 to start", 120)
        assert 200 == cp.api("PATCH", "/v1/servers/rl-box", {"transport": "HTTP"}).status
        wait_until(lambda: agent_kind(state) == "HTTP", "the agent to take the document naming HTTP", 120)
        direct = len(cp.log.read_text())
        go.touch()
        assert "UPDATE_COMPLETE" == cp.wait_stack("rl", timeout=180)["status"]
        assert 202 == cp.api("PUT", "/v1/stacks/rl", {"template": gated_per_server(["rl-box"], go, 4)}).status
        assert "UPDATE_COMPLETE" == cp.wait_stack("rl", timeout=180)["status"]
        assert {"out0": "round 4"} == cp.outputs("rl")
        straight = agent_lines(cp, direct)
        assert 2 <= len([line for line in straight if "/v1/signal/" in line]), straight
        assert [] == [line for line in straight if "anneal-relay" in line]

        # Nothing lost, nothing twice, nothing refused anywhere.
        events = cp.api("GET", "/v1/stacks/rl/events").body
        results = Counter(e["generation"] for e in events if e["deployment_id"] and e["status"] == "COMPLETE")
        assert {1: 1, 2: 1, 3: 1, 4: 1} == dict(results)
        assert 0 == relay_status(relay_port)["refused"]
        assert [] == list((tmp_path / "relay" / "refused").iterdir())
        db = sqlite3.connect(state / "ledger.sqlite")
        try:
            outcomes = [row[0] for row in db.execute("SELECT outcome FROM outbox")]
        finally:
            db.close()
        assert [] == [o for o in outcomes if o and "refused" in o]
        refused = cp.api("PATCH", "/v1/servers/rl-box", {"transport": "RELAYS"})
        assert 400 == refused.status and "RELAY" in refused.body["error"]["message"]
    finally:
        stop_agent(agent)
        stop_process(relay, 60)
        stop_control_plane(cp)
