"""R22 on the agent's side: the agent's clock 15 minutes behind or ahead of the control plane and the store.

libfaketime (the `faketime` package, preloaded into the agent processes only) shifts the
agent's wall clock; its monotonic clock is left alone (``FAKETIME_DONT_FAKE_MONOTONIC``).
Pass: every signal arrives (through Swift and through S3's presigned URLs), no store URL
is refused, and no URL lives longer than 7 days.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.swift import Swift, swift_server
from tests.integration.conftest import BIN, stop_control_plane
from tests.integration.test_url_expiry import LIBFAKETIME, SKEW_TEMPLATE, agent_log, section, start

__all__ = ["swift_server"]
pytestmark = pytest.mark.slow
WEEK = 7 * 24 * 3600
#: SKEW_TEMPLATE whose hooks also report their own clock (`date +%s`): the skew reaches them.
TEMPLATE = (
    SKEW_TEMPLATE.replace("outputs: [{name: said}]", "outputs: [{name: said}, {name: clock}]")
    .replace(
        """printf 'round %s' "$ROUND" > "$heat_outputs_path.said"
""",
        """printf 'round %s' "$ROUND" > "$heat_outputs_path.said"
        date +%s > "$heat_outputs_path.clock"
""",
    )
    .replace(
        "  s3: {value: {get_attr: [ds3, said]}}",
        "  s3: {value: {get_attr: [ds3, said]}}\n  clock: {value: {get_attr: [dsw, clock]}}",
    )
)


@pytest.mark.parametrize("skew", ["-15m", "+15m"])
def test_r22_agent_clock_fifteen_minutes_off_fails_no_signal(
    skew: str, swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} missing: run `make tools` (ci/tools.d/40-swift.sh installs faketime)")
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    cp = start(swift_server, tmp_path, "--store-url-lifetime=300", "--provisioner=enrol")
    shifted = {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": skew, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
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
                    env={**os.environ, **shifted, "ANNEAL_ENROL_TOKEN": created.body["enrol_token"]},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        for rnd in range(2):
            body = {"template": TEMPLATE, "parameters": {"round": str(rnd)}}
            resp = (
                cp.create("sk", TEMPLATE, params={"round": "0"})
                if rnd == 0
                else cp.api("PUT", "/v1/stacks/sk", body)
            )
            assert resp.status in (201, 202), resp.body
            status = cp.wait_stack("sk", timeout=180)["status"]
            assert status in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), (
                cp.api("GET", "/v1/deployments?stack=sk").body,
                agent_log(cp, "sk-sw")[-3000:],
            )
            outputs = cp.outputs("sk")
            assert {"sw": f"round {rnd}", "s3": f"round {rnd}"} == {k: outputs[k] for k in ("sw", "s3")}
            off = int(str(outputs["clock"]).strip()) - time.time()  # the hook ran on the agent's clock
            assert abs(off - (900 if skew.startswith("+") else -900)) < 120, off
        for name, kind in (("sk-sw", "SWIFT"), ("sk-s3", "S3")):
            assert kind == section(cp, name)["kind"]
            log = agent_log(cp, name)
            assert "store refused" not in log, log[-2000:]
            assert "refused (" not in log
            assert "expired" not in log, log[-2000:]
            assert 0 < section(cp, name)["expires"] - time.time() <= WEEK
    finally:
        for agent in agents:
            agent.terminate()
            agent.wait(30)
        stop_control_plane(cp)
