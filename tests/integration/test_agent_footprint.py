"""The agent loads TLS only when it speaks it, and still speaks it when it must (issue 20).

Real agents against a real control plane: one enrolled over http:// runs without Python's
``ssl`` (its extension module is not in the process's memory map); one enrolled through a
TLS front (tests/support/tlsfront.py, a self-signed certificate the agent trusts through
SSL_CERT_FILE) deploys over https://; and one started on http:// and then moved to a relay
at an https:// URL restarts itself in place (same pid) with ``ssl`` and deploys through it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support.agents import enrol_agent, stop_agent, transport_section
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import BIN, free_port, stop_process
from tests.support.templates import one_script_deployment
from tests.support.tlsfront import start_front
from tests.support.waiting import wait_until

SCRIPT = '#!/bin/sh\nprintf \'said %s\' "$deploy_server_id" > "$heat_outputs_path.said"\n'


def ssl_loaded(pid: int) -> bool:
    """True when Python's ssl extension module is mapped into *pid*."""
    return "/_ssl." in Path(f"/proc/{pid}/maps").read_text()


def deploy(cp: ControlPlane, stack: str, server: str) -> None:
    template = one_script_deployment(SCRIPT, outputs=["said"], server=server)
    cp.create_stack(stack, template, timeout=120)
    assert cp.outputs(stack)["said"].startswith("said ")


def run_agent(state: Path, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(BIN / "anneal-agent"), "run", "--state-dir", str(state), "--poll-wait", "2"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )


def test_an_agent_on_an_http_url_deploys_without_loading_ssl(tmp_path: Path) -> None:
    """Enrolled over http://, the agent deploys, and Python's ssl module is never loaded in it."""
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    agent = None
    try:
        argv = enrol_agent(cp, "plain", tmp_path / "state")
        with open(tmp_path / "agent.log", "ab") as log:
            agent = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deploy(cp, "plain", "plain")
        assert not ssl_loaded(agent.pid)
    finally:
        stop_agent(agent)
        stop_control_plane(cp)


def test_an_agent_on_an_https_url_deploys_through_tls(tmp_path: Path) -> None:
    """Enrolled through a TLS front, the agent polls, signals and heartbeats over https:// and deploys."""
    cp = start_control_plane(tmp_path, "--provisioner", "enrol", "--access-log")
    front, https = start_front(tmp_path, cp.port)
    agent = None
    env = {"SSL_CERT_FILE": str(tmp_path / "front-cert.pem")}
    try:
        token = cp.api("POST", "/v1/servers", {"name": "sealed"}).body["enrol_token"]
        enrol = [str(BIN / "anneal-agent"), "enrol", "--url", https, f"--token={token}"]
        done = subprocess.run(
            [*enrol, "--state-dir", str(tmp_path / "state")],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=60,
            check=False,
        )
        assert 0 == done.returncode, done.stderr
        agent = run_agent(tmp_path / "state", tmp_path / "agent.log", env)
        deploy(cp, "sealed", "sealed")
        assert ssl_loaded(agent.pid)
    finally:
        stop_agent(agent)
        stop_process(front)
        stop_control_plane(cp)


def test_an_agent_moved_to_an_https_relay_restarts_with_tls_and_deploys(tmp_path: Path) -> None:
    """Started without ssl, an agent moved to an https:// relay restarts in place with it and deploys there."""
    port = free_port()
    front, https = start_front(tmp_path, port)  # stands for a relay: it forwards every path upstream
    cp = start_control_plane(tmp_path, "--provisioner", "enrol", f"--relay-url={https}", port=port)
    agent = None
    env = {"SSL_CERT_FILE": str(tmp_path / "front-cert.pem")}
    try:
        enrol_agent(cp, "mover", tmp_path / "state")
        agent = run_agent(tmp_path / "state", tmp_path / "agent.log", env)
        deploy(cp, "before", "mover")
        assert not ssl_loaded(agent.pid)
        moved = cp.cli("server", "transport", "mover", "RELAY", "-f", "json")
        assert 0 == moved.returncode, moved.stderr
        assert "RELAY" == json.loads(moved.stdout)["transport"]
        wait_until(lambda: transport_section(tmp_path / "state").get("kind") == "RELAY", "the move", 120)
        wait_until(lambda: ssl_loaded(agent.pid), "the agent to restart with ssl", 120)
        assert agent.poll() is None  # the same process (exec), still running
        deploy(cp, "after", "mover")
        log = (tmp_path / "agent.log").read_text()
        assert "restarting with TLS" in log
    finally:
        stop_agent(agent)
        stop_process(front)
        stop_control_plane(cp)
