"""R22: store URL expiry and clock skew, against real Swift (TempURL) and its s3api (SigV4).

* The control plane runs 15 minutes behind and 15 minutes ahead of the store and the
  agents (libfaketime, `faketime` package, preloaded into the control plane only):
  URLs of 5 minutes' need plus the default 15-minute margin keep every signal working.
* An agent frozen (SIGSTOP) past its URLs' expiry recovers in one poll: the store
  refuses the old document URL, the agent asks the control plane's HTTP endpoint once
  and carries on with fresh URLs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.swift import Swift, swift_server
from tests.integration.conftest import BIN, ControlPlane, start_control_plane, stop_control_plane

__all__ = ["swift_server"]
pytestmark = pytest.mark.slow
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

TEMPLATE = """
heat_template_version: rocky
parameters:
  round: {type: string}
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: ROUND}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        printf 'round %s' "$ROUND" > "$heat_outputs_path.said"
  sw: {type: OS::Heat::DeployedServer, properties: {software_config_transport: SWIFT}}
  s3: {type: OS::Heat::DeployedServer, properties: {software_config_transport: S3}}
  dsw:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: sw}, input_values: {ROUND: {get_param: round}}}
  ds3:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: s3}, input_values: {ROUND: {get_param: round}}}
outputs:
  sw: {value: {get_attr: [dsw, said]}}
  s3: {value: {get_attr: [ds3, said]}}
"""


SKEW_TEMPLATE = (
    TEMPLATE.replace(
        "  sw: {type: OS::Heat::DeployedServer, properties: {software_config_transport: SWIFT}}\n", ""
    )
    .replace("  s3: {type: OS::Heat::DeployedServer, properties: {software_config_transport: S3}}\n", "")
    .replace("server: {get_resource: sw}", "server: sk-sw")
    .replace("server: {get_resource: s3}", "server: sk-s3")
)


def start(swift: Swift, tmp: Path, *extra: str) -> ControlPlane:
    return start_control_plane(
        tmp,
        f"--swift-auth-url={swift.auth_url}",
        f"--swift-user={swift.user}",
        f"--s3-endpoint={swift.url}",
        f"--s3-access-key={swift.user}",
        f"--store-prefix=x{tmp.name[-6:].lower().replace('_', '')}",
        "--store-poll-interval=1",
        "--store-signal-poll=0.5",
        *extra,
    )


def agent_log(cp: ControlPlane, name: str) -> str:
    return (cp.agent_dir(name) / "agent.log").read_text()


def section(cp: ControlPlane, name: str) -> dict:
    import sqlite3

    db = sqlite3.connect(cp.agent_dir(name) / "ledger.sqlite")
    try:
        return dict(json.loads(db.execute("SELECT value FROM state WHERE key='transport'").fetchone()[0]))
    finally:
        db.close()


@pytest.mark.parametrize("skew", ["-15m", "+15m"])
def test_r22_fifteen_minutes_of_clock_skew_fail_no_signal(
    skew: str, swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} missing: run `make tools` (ci/tools.d/40-swift.sh installs faketime)")
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    # Only the control plane is shifted; Swift and the agents keep the real time.
    monkeypatch.setenv("LD_PRELOAD", str(LIBFAKETIME))
    monkeypatch.setenv("FAKETIME", skew)
    monkeypatch.setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1")
    cp = start(swift_server, tmp_path, "--store-url-lifetime=300", "--provisioner=enrol")
    for var in ("LD_PRELOAD", "FAKETIME", "FAKETIME_DONT_FAKE_MONOTONIC"):
        monkeypatch.delenv(var)
    agents: list[subprocess.Popen[bytes]] = []
    try:
        for name, kind in (("sk-sw", "SWIFT"), ("sk-s3", "S3")):
            created = cp.api("POST", "/v1/servers", {"name": name, "transport": kind})
            assert 201 == created.status, created.body
            state = cp.agent_dir(name)
            state.mkdir(parents=True)
            log = open(state / "agent.log", "ab")  # noqa: SIM115
            agents.append(
                subprocess.Popen(
                    [
                        str(BIN / "anneal-agent"),
                        "run",
                        "--url",
                        cp.url,
                        "--poll-wait=5",
                        "--state-dir",
                        str(state),
                    ],
                    env={**os.environ, "ANNEAL_ENROL_TOKEN": created.body["enrol_token"]},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        for rnd in range(2):
            body = {"template": SKEW_TEMPLATE, "parameters": {"round": str(rnd)}}
            resp = (
                cp.create("sk", SKEW_TEMPLATE, params={"round": "0"})
                if rnd == 0
                else cp.api("PUT", "/v1/stacks/sk", body)
            )
            assert resp.status in (201, 202), resp.body
            status = cp.wait_stack("sk", timeout=180)["status"]
            assert status in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), cp.api(
                "GET", "/v1/deployments?stack=sk"
            ).body
            assert {"sw": f"round {rnd}", "s3": f"round {rnd}"} == cp.outputs("sk")
        for name, kind in (("sk-sw", "SWIFT"), ("sk-s3", "S3")):
            assert kind == section(cp, name)["kind"]
            log = agent_log(cp, name)
            assert "store refused" not in log, log[-2000:]
            assert "refused (" not in log
        # The URLs were made on the shifted clock: the store saw them with 5 or 35 minutes left.
        expires = section(cp, "sk-sw")["expires"]
        assert 0 < expires - time.time() <= 300 + 900 + 900 + 60
    finally:
        for agent in agents:
            agent.terminate()
            agent.wait(30)
        stop_control_plane(cp)


def test_r22_expired_urls_recover_in_one_poll(
    swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    cp = start(swift_server, tmp_path, "--store-url-lifetime=8", "--store-clock-margin=0")
    try:
        assert 201 == cp.create("ex", TEMPLATE, params={"round": "0"}).status
        assert "CREATE_COMPLETE" == cp.wait_stack("ex", timeout=180)["status"]
        pids = {n: int((cp.agent_dir(n) / "agent.pid").read_text()) for n in ("ex-sw", "ex-s3")}
        frozen = {n: section(cp, n)["expires"] for n in pids}
        for pid in pids.values():
            os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 60
            while time.time() < max(frozen.values()) + 2:  # until the URLs they hold have expired
                assert time.monotonic() < deadline
                time.sleep(0.5)
        finally:
            for pid in pids.values():
                os.kill(pid, signal.SIGCONT)
        body = {"template": TEMPLATE, "parameters": {"round": "1"}}
        assert 202 == cp.api("PUT", "/v1/stacks/ex", body).status
        assert "UPDATE_COMPLETE" == cp.wait_stack("ex", timeout=180)["status"]
        assert {"sw": "round 1", "s3": "round 1"} == cp.outputs("ex")
        for name in pids:
            lines = agent_log(cp, name).splitlines()
            asked = [i for i, line in enumerate(lines) if "asking the control plane for fresh URLs" in line]
            assert asked, f"{name} never hit an expired URL"
            # Recovery within one poll: the very next thing it did was accept a fresh document.
            after = [
                line for line in lines[asked[0] + 1 :] if "accepted document" in line or "poll failed" in line
            ]
            assert "accepted document" in after[0], lines[asked[0] :][:5]
    finally:
        stop_control_plane(cp)
