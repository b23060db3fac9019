"""R22: store URL expiry and clock skew, against real Swift (TempURL) and its s3api (SigV4).

* The control plane runs 15 minutes behind and 15 minutes ahead of the store and the
  agents (libfaketime, `faketime` package, preloaded into the control plane only):
  URLs of 5 minutes' need plus the default 15-minute margin keep every signal working.
* An agent frozen (SIGSTOP) past its URLs' expiry recovers in one poll: the store
  refuses the old document URL, the agent asks the control plane's HTTP endpoint once
  and carries on with fresh URLs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import agent_log, transport_section
from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.faketime import SKEW_SERVERS, shifted, skew_rounds, start_on_stores, start_skew_agents
from tests.support.processes import stop_process
from tests.support.swift import Swift
from tests.support.templates import round_on_stores
from tests.support.waiting import wait_until

pytestmark = pytest.mark.catalogue("R22")

TEMPLATE = round_on_stores()
SKEW_TEMPLATE = round_on_stores(list(SKEW_SERVERS))


def section(cp: ControlPlane, name: str) -> dict[str, Any]:
    return transport_section(cp.agent_dir(name))


@pytest.mark.parametrize("skew", ["-15m", "+15m"])
def test_control_plane_clock_fifteen_minutes_off_fails_no_signal(
    skew: str, swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the control plane's clock 15 min off, on Swift and S3 no signal fails and no URL is refused."""
    clock = shifted(skew)
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    # Only the control plane is shifted; Swift and the agents keep the real time.
    cp = start_on_stores(swift_server, tmp_path, "--store-url-lifetime=300", "--provisioner=enrol", env=clock)
    agents: list[subprocess.Popen[bytes]] = []
    try:
        start_skew_agents(cp, agents)
        for rnd, outputs in skew_rounds(cp, SKEW_TEMPLATE):
            assert {"sw": f"round {rnd}", "s3": f"round {rnd}"} == outputs
        for name, kind in SKEW_SERVERS.items():
            assert kind == section(cp, name)["kind"]
            log = agent_log(cp, name)
            assert "store refused" not in log, log[-2000:]
            assert "refused (" not in log
        # The URLs were made on the shifted clock: the store saw them with 5 or 35 minutes left.
        expires = section(cp, "sk-sw")["expires"]
        assert 0 < expires - time.time() <= 300 + 900 + 900 + 60
    finally:
        for agent in agents:
            stop_process(agent)
        stop_control_plane(cp)


def test_expired_urls_recover_in_one_poll(
    swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents holding expired store URLs get fresh ones and take the next document within one poll."""
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    cp = start_on_stores(swift_server, tmp_path, "--store-url-lifetime=8", "--store-clock-margin=0")
    try:
        assert 201 == cp.create("ex", TEMPLATE, params={"round": "0"}).status
        assert "CREATE_COMPLETE" == cp.wait_stack("ex", timeout=180)["status"]
        pids = {n: int((cp.agent_dir(n) / "agent.pid").read_text()) for n in ("ex-sw", "ex-s3")}
        frozen = {n: section(cp, n)["expires"] for n in pids}
        for pid in pids.values():
            os.kill(pid, signal.SIGSTOP)
        try:
            expired = max(frozen.values()) + 2
            wait_until(lambda: time.time() >= expired, "the URLs they hold to expire", 60, interval=0.5)
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
