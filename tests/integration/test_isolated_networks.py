"""R10: agents in a network namespace that reaches only the object store, or only a relay.

Each test creates its own namespace (veth pair, a /30 it assigns, routes checked with
`ip route get` first, no default route). The control plane listens on 127.0.0.1 of the
root namespace and logs every request (`--access-log`): the tests count, at the control
plane, the requests that came from the namespace.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import start_agent, transport_section
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.netns import Namespace, isolated
from tests.support.processes import BIN, free_port, stop_all
from tests.support.relay import start_relay
from tests.support.swift import USER, start_swift
from tests.support.templates import script_per_server
from tests.support.waiting import wait_log

pytestmark = pytest.mark.catalogue("R10")

SERVERS = 3


def template(names: list[str]) -> str:
    """Each named server says hello with its name (outputs out<i>)."""
    script = """
    #!/bin/sh
    printf 'hello %s' "$WHO" > "$heat_outputs_path.said"
    """
    return script_per_server(script, names, inputs=[{"WHO": name} for name in names], output="said")


def access_lines(cp: ControlPlane, start: int) -> list[str]:
    return [line for line in cp.log.read_text()[start:].splitlines() if "control.access" in line]


@pytest.fixture
def ns() -> Iterator[Namespace]:
    with isolated("t") as namespace:
        yield namespace


def test_agents_that_reach_only_the_store_deploy_without_the_api(
    ns: Namespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents in a namespace that reaches only Swift complete every deployment without one API request."""
    root = Path(tempfile.mkdtemp(prefix="anneal-swift-"))
    swift = start_swift(root, host=ns.host)  # reachable from the namespace over the veth only
    procs: list[subprocess.Popen[bytes]] = []
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift.key)
    cp = start_control_plane(
        tmp_path,
        "--provisioner=enrol",
        "--access-log",
        f"--swift-auth-url={swift.auth_url}",
        f"--swift-user={USER}",
        "--store-poll-interval=1",
        "--store-signal-poll=0.5",
    )
    try:
        wait_log(cp.log, "Swift ready")
        names = [f"iso-{i}" for i in range(SERVERS)]
        dirs = {}
        for name in names:
            created = cp.api("POST", "/v1/servers", {"name": name, "transport": "SWIFT"})
            assert 201 == created.status, created.body
            state = tmp_path / "agents" / name
            dirs[name] = state
            enrol = [str(BIN / "anneal-agent"), "enrol", "--url", cp.url, "--state-dir", str(state)]
            subprocess.run([*enrol, "--token", created.body["enrol_token"]], check=True, capture_output=True)
            # Provisioning, still on the management network: the first document names the store.
            once = [str(BIN / "anneal-agent"), "once", "--state-dir", str(state)]
            subprocess.run(once, check=True, capture_output=True)
            section = transport_section(state)
            assert "SWIFT" == section["kind"]
            assert section["document_url"].startswith(f"http://{ns.host}:")
        mark = len(cp.log.read_text())
        for name in names:
            with open(tmp_path / f"{name}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [*ns.wrap(), str(BIN / "anneal-agent"), "run", "--state-dir", str(dirs[name])],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        assert 201 == cp.create("iso", template(names)).status
        assert "CREATE_COMPLETE" == cp.wait_stack("iso", timeout=180)["status"]
        outputs = cp.outputs("iso")
        assert {f"out{i}": f"hello {n}" for i, n in enumerate(names)} == outputs
        assert SERVERS == cp.log.read_text()[mark:].count("SWIFT: signal for deployment")
        lines = access_lines(cp, mark)
        assert lines, "the access log records the test's own API calls"
        from_agents = [line for line in lines if re.search(r'"\w+ /v1/(agent|signal)/', line)]
        from_namespace = [line for line in lines if ns.inner in line]
        assert [] == from_agents
        assert [] == from_namespace
    finally:
        stop_all(procs)
        stop_control_plane(cp)
        swift.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_agents_that_reach_only_a_relay_deploy_through_it(ns: Namespace, tmp_path: Path) -> None:
    """Agents with no route to the control plane enrol, poll and signal through a relay; all complete."""
    cp = start_control_plane(tmp_path, "--provisioner=enrol", "--access-log")
    relay_port = free_port(ns.host)
    relay_url = f"http://{ns.host}:{relay_port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_relay(tmp_path, relay_port, cp.url, host=ns.host))
        mark = len(cp.log.read_text())
        names = [f"rel-{i}" for i in range(SERVERS)]
        for name in names:
            state, log = tmp_path / "agents" / name, tmp_path / f"{name}.log"
            procs.append(start_agent(cp, name, state, log, url=relay_url, wrap=ns.wrap()))
        assert 201 == cp.create("rel", template(names)).status
        assert "CREATE_COMPLETE" == cp.wait_stack("rel", timeout=180)["status"]
        assert {f"out{i}": f"hello {n}" for i, n in enumerate(names)} == cp.outputs("rel")
        lines = access_lines(cp, mark)
        relayed = [line for line in lines if re.search(r'"\w+ /v1/(agent|signal)/', line)]
        assert len(relayed) >= 3 * SERVERS  # enrol, polls and signals all arrived, through the relay
        assert [] == [line for line in lines if ns.inner in line]
        # The agents never had a route to the control plane at all.
        probe = subprocess.run(
            [*ns.wrap(), "ip", "route", "get", ns.host], capture_output=True, text=True, check=True
        )
        assert "dev" in probe.stdout
    finally:
        stop_all(procs)
        stop_control_plane(cp)
