"""Idle connections cannot take the control plane's descriptors: health and long-polls stay served.

The control plane runs under `prlimit` with the descriptor limit of its systemd unit
(packaging/systemd/anneal.service's LimitNOFILE) and with systemd's default 1,024, which 2,000
idle connections exceed. Before the connection guard (agent/serving.py) /v1/health went unanswered
for about 50 s at 1,100 connections while "Too many open files" tracebacks filled the log.
Latencies are printed, not asserted (the machine is shared); every health probe must be
answered 200, none refused or timed out.
"""

from __future__ import annotations

import http.client
import re
import resource
import socket
import statistics
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from agent.keys import ensure_keys
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import ROOT

IDLE = 2000
UNIT = ROOT / "packaging" / "systemd" / "anneal.service"
#: How long the agent's long-poll, started before the flood, waits for a change.
LONG_POLL = 8


def unit_limit() -> int:
    """The LimitNOFILE the control plane's systemd unit sets."""
    found = re.search(r"^LimitNOFILE=(\d+)$", UNIT.read_text(), re.MULTILINE)
    assert found, f"{UNIT} sets no LimitNOFILE"
    return int(found.group(1))


def _agent_credential(cp: ControlPlane, tmp: Path) -> str:
    token = cp.api("POST", "/v1/servers", {"name": "poller"}).body["enrol_token"]
    keys = ensure_keys(tmp / "agent-keys")
    enrolled = cp.api("POST", "/v1/agent/enrol", {"token": token, "public_keys": keys}, token=None)
    assert 201 == enrolled.status, enrolled.body
    return str(enrolled.body["credential"])


def _long_poll(cp: ControlPlane, credential: str, result: dict[str, object]) -> None:
    """GET the agent's document with its current ETag and wait=LONG_POLL: a 304 at the end."""
    conn = http.client.HTTPConnection("127.0.0.1", cp.port, timeout=LONG_POLL + 60)
    try:
        headers = {"Authorization": f"Bearer {credential}"}
        conn.request("GET", "/v1/agent/document", headers=headers)
        first = conn.getresponse()
        first.read()
        conn.request(
            "GET",
            f"/v1/agent/document?wait={LONG_POLL}",
            headers={**headers, "If-None-Match": first.headers["ETag"]},
        )
        result["started"] = True
        answer = conn.getresponse()
        answer.read()
        result["status"] = answer.status
    except OSError as e:
        result["error"] = repr(e)
    finally:
        conn.close()


def _health(cp: ControlPlane) -> tuple[float, str]:
    """Seconds /v1/health took on a new connection, and how it ended: its status, or the error
    (refused, reset, timed out after 10 s)."""
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", cp.port, timeout=10)
    try:
        conn.request("GET", "/v1/health")
        response = conn.getresponse()
        response.read()
        outcome = str(response.status)
    except OSError as e:
        outcome = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    return time.monotonic() - start, outcome


def _open_idle(port: int, count: int, stack: ExitStack) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
        socks.append(s)
    return socks


def _closed_by_server(socks: list[socket.socket]) -> int:
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


@pytest.mark.parametrize("limit", ["unit", "default-1024"])
def test_idle_connections_leave_health_and_long_polls_served(tmp_path: Path, limit: str) -> None:
    """2,000 idle connections under the unit's limit and under 1,024: health answers, the long-poll ends in 304."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # The unit's limit, or this machine's hard limit when that is lower (raising it needs CAP_SYS_RESOURCE).
    nofile = min(unit_limit(), hard) if limit == "unit" else 1024
    assert hard >= IDLE + 200, f"this test opens {IDLE} sockets; its hard descriptor limit is {hard}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, IDLE + 200), hard))
    cp = start_control_plane(tmp_path, "--provisioner", "enrol", wrap=["prlimit", f"--nofile={nofile}", "--"])
    try:
        poll: dict[str, object] = {}
        poller = threading.Thread(target=_long_poll, args=(cp, _agent_credential(cp, tmp_path), poll))
        poller.start()
        while "started" not in poll and "error" not in poll and poller.is_alive():
            time.sleep(0.05)
        with ExitStack() as stack:
            socks = _open_idle(cp.port, IDLE, stack)
            probes = [_health(cp) for _ in range(20)]
            closed = _closed_by_server(socks)
        latencies = [seconds for seconds, _ in probes]
        poller.join(LONG_POLL + 90)
        print(
            f"\nLimitNOFILE {nofile}, {IDLE} idle connections: health p50 {statistics.median(latencies) * 1000:.1f} ms, "
            f"max {max(latencies) * 1000:.1f} ms over {len(latencies)}; {closed} idle connections closed by the server"
        )
        # Every probe answered 200: none refused, reset or timed out (how fast is printed, not asserted).
        assert [] == [outcome for _, outcome in probes if outcome != "200"]
        assert 304 == poll.get("status"), poll
        log = cp.log.read_text(errors="replace")
        print(f"control-plane log: {len(log)} bytes")
        assert "Traceback" not in log, log[-4000:]
        assert len(log) < 64 * 1024, f"the log grew to {len(log)} bytes"
        if nofile < IDLE:  # warned at start; the oldest idle connections made room, closed by the server
            assert "is below the 2256 that --max-agents 1000 needs" in log
            assert closed > 0
        else:  # under the unit's limit the fleet fits: no warning at start, no descriptor ran out
            assert "the descriptor limit" not in log and "Too many open files" not in log, log[-4000:]
    finally:
        stop_control_plane(cp)
