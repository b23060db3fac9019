"""Heartbeats folded into polls: an idle agent's long-polls keep its server alive, heartbeats say changes.

A local agent (`anneal-agent run`, HTTP long-poll every 2 s, a heartbeat due every 1 s)
deploys one script, then idles: its server's `last_seen` keeps moving (its polls, written
by control/services/alive.py) while its heartbeats, which the control plane stamps with
`agent_status.reported_at`, all but stop; a change (a new deployment) is reported again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

IDLE = 8.0


def server(cp: ControlPlane) -> dict[str, Any]:
    found = cp.api("GET", "/v1/servers/idle-box")
    assert 200 == found.status, found.body
    return dict(found.body)


def test_an_idle_agent_stays_alive_by_its_polls_and_heartbeats_only_changes(tmp_path: Path) -> None:
    """Idle 8 s with a beat due every second: at most one heartbeat (a re-assertion), last_seen still moves."""
    cp = start_control_plane(tmp_path, "--agent-arg=--heartbeat-interval=1")
    try:
        text = one_script_deployment(
            "#!/bin/sh\necho $REV\n",
            params={"rev": "string"},
            inputs={"REV": "{get_param: rev}"},
            server_name="idle-box",
        )
        cp.create_stack("idle", text, params={"rev": "r1"})
        wait_until(
            lambda: server(cp)["agent_status"].get("generations", {}).get("signalled"),
            "the signal reported",
            30,
        )
        time.sleep(2)  # the last report after the signal is in
        start = server(cp)
        reports = {start["agent_status"]["reported_at"]}
        deadline = time.monotonic() + IDLE
        while time.monotonic() < deadline:
            reports.add(server(cp)["agent_status"]["reported_at"])
            time.sleep(0.25)
        moved = wait_until(
            lambda: (s := server(cp))["last_seen"] > start["agent_status"]["reported_at"] + IDLE / 2 and s,
            "last_seen moved by the polls alone",
            30,
        )
        print(
            f"\nidle {IDLE:.0f} s, a beat due every 1 s: {len(reports) - 1} heartbeat(s) sent; agent {moved['agent']}"
        )
        assert len(reports) - 1 <= 1  # at most the addresses' re-assertion (every 10 beats)
        assert "alive" == moved["agent"]
        cp.update_stack("idle", text, {"rev": "r2"})
        wait_until(
            lambda: server(cp)["agent_status"]["reported_at"] > max(reports),
            "the change reported by a heartbeat",
            30,
        )
    finally:
        stop_control_plane(cp)
