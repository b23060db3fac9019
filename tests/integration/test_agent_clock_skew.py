"""R22 on the agent's side: the agent's clock 15 minutes behind or ahead of the control plane and the store.

libfaketime (the `faketime` package, preloaded into the agent processes only) shifts the
agent's wall clock; its monotonic clock is left alone (``FAKETIME_DONT_FAKE_MONOTONIC``).
Pass: every signal arrives (through Swift and through S3's presigned URLs), no store URL
is refused, and no URL lives longer than 7 days.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.support.agents import agent_log, transport_section
from tests.support.controlplane import stop_control_plane
from tests.support.faketime import SKEW_SERVERS, shifted, skew_rounds, start_on_stores, start_skew_agents
from tests.support.processes import stop_process
from tests.support.swift import Swift
from tests.support.templates import round_on_stores

pytestmark = pytest.mark.catalogue("R22")

WEEK = 7 * 24 * 3600
#: The hooks also report their own clock (`date +%s`): the skew reaches them.
TEMPLATE = round_on_stores(list(SKEW_SERVERS), clock=True)


@pytest.mark.parametrize("skew", ["-15m", "+15m"])
def test_agent_clock_fifteen_minutes_off_fails_no_signal(
    skew: str, swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the agents' clocks 15 min off, on Swift and S3 no signal fails and no URL is refused."""
    clock = shifted(skew)
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    cp = start_on_stores(swift_server, tmp_path, "--store-url-lifetime=300", "--provisioner=enrol")
    agents: list[subprocess.Popen[bytes]] = []
    try:
        start_skew_agents(cp, agents, env=clock)
        for rnd, outputs in skew_rounds(cp, TEMPLATE):
            assert {"sw": f"round {rnd}", "s3": f"round {rnd}"} == {k: outputs[k] for k in ("sw", "s3")}
            off = int(str(outputs["clock"]).strip()) - time.time()  # the hook ran on the agent's clock
            assert abs(off - (900 if skew.startswith("+") else -900)) < 120, off
        for name, kind in SKEW_SERVERS.items():
            section = transport_section(cp.agent_dir(name))
            assert kind == section["kind"]
            log = agent_log(cp, name)
            assert "store refused" not in log, log[-2000:]
            assert "refused (" not in log
            assert "expired" not in log, log[-2000:]
            assert 0 < section["expires"] - time.time() <= WEEK
    finally:
        for agent in agents:
            stop_process(agent)
        stop_control_plane(cp)
