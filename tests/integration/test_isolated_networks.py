"""R10: agents in a network namespace that reaches only the object store, or only a relay.

Each test creates its own namespace (veth pair, a /30 it assigns, routes checked with
`ip route get` first, no default route). The control plane listens on 127.0.0.1 of the
root namespace and logs every request (`--access-log`): the tests count, at the control
plane, the requests that came from the namespace.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.netns import Namespace, isolated
from tests.fixtures.swift import USER, free_port, start_swift
from tests.integration.conftest import BIN, ControlPlane, start_control_plane, stop_control_plane

pytestmark = pytest.mark.slow
SERVERS = 3


def template(names: list[str]) -> str:
    deployments = "".join(
        f"""
  dep{i}:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: cfg}}
      server: {name}
      input_values: {{WHO: {name}}}
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
      inputs: [{{name: WHO}}]
      outputs: [{{name: said}}]
      config: |
        #!/bin/sh
        printf 'hello %s' "$WHO" > "$heat_outputs_path.said"
{deployments}
outputs:{outputs}
"""


def access_lines(cp: ControlPlane, start: int) -> list[str]:
    return [line for line in cp.log.read_text()[start:].splitlines() if "control.access" in line]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_log(cp: ControlPlane, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in cp.log.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not in the control plane's log {cp.log}")
        time.sleep(0.2)


@pytest.fixture
def ns() -> Iterator[Namespace]:
    with isolated("t") as namespace:
        yield namespace


def test_r10_store_only_namespace(ns: Namespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
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
        wait_log(cp, "Swift ready")
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
            db = sqlite3.connect(state / "ledger.sqlite")
            section = json.loads(db.execute("SELECT value FROM state WHERE key='transport'").fetchone()[0])
            db.close()
            assert "SWIFT" == section["kind"]
            assert section["document_url"].startswith(f"http://{ns.host}:")
        mark = len(cp.log.read_text())
        for name in names:
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115
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
        stop(procs)
        stop_control_plane(cp)
        swift.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_r10_relay_only_namespace(ns: Namespace, tmp_path: Path):
    cp = start_control_plane(tmp_path, "--provisioner=enrol", "--access-log")
    relay_port = free_port(ns.host)
    relay_url = f"http://{ns.host}:{relay_port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        relay_log = open(tmp_path / "relay.log", "wb")  # noqa: SIM115
        relay = subprocess.Popen(
            [
                str(BIN / "anneal-agent"),
                "relay",
                "--listen",
                f"{ns.host}:{relay_port}",
                "--upstream",
                cp.url,
                "--state-dir",
                str(tmp_path / "relay"),
            ],
            stdout=relay_log,
            stderr=subprocess.STDOUT,
        )
        procs.append(relay)
        deadline = time.monotonic() + 30
        while b"relay on" not in (tmp_path / "relay.log").read_bytes():
            assert time.monotonic() < deadline and relay.poll() is None, (tmp_path / "relay.log").read_text()
            time.sleep(0.1)
        mark = len(cp.log.read_text())
        names = [f"rel-{i}" for i in range(SERVERS)]
        for name in names:
            created = cp.api("POST", "/v1/servers", {"name": name})
            assert 201 == created.status
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115
            env = {**os.environ, "ANNEAL_ENROL_TOKEN": created.body["enrol_token"]}
            procs.append(
                subprocess.Popen(
                    [
                        *ns.wrap(),
                        str(BIN / "anneal-agent"),
                        "run",
                        "--url",
                        relay_url,
                        "--poll-wait=5",
                        "--state-dir",
                        str(tmp_path / "agents" / name),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
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
        stop(procs)
        stop_control_plane(cp)
