"""A real `anneal-agent relay` on loopback, and its status counters."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

from tests.support.processes import BIN
from tests.support.waiting import wait_until


def start_relay(tmp: Path, port: int, upstream: str, host: str = "127.0.0.1") -> subprocess.Popen[bytes]:
    """Start a relay on *host*:*port* in front of *upstream*, its state in *tmp*/relay; wait until it answers."""
    with open(tmp / "relay.log", "ab") as log:
        proc = subprocess.Popen(
            [
                str(BIN / "anneal-agent"),
                "relay",
                "--listen",
                f"{host}:{port}",
                "--upstream",
                upstream,
                "--state-dir",
                str(tmp / "relay"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def up() -> bool:
        assert proc.poll() is None, (tmp / "relay.log").read_text()
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/relay/status", timeout=1):
                return True
        except OSError:
            return False

    wait_until(up, f"relay not up; log: {tmp / 'relay.log'}", 30, interval=0.1)
    return proc


def relay_status(port: int) -> dict[str, int]:
    """The relay's counters (forwarded, spooled_now, refused, ...)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/relay/status", timeout=10) as resp:
        return dict(json.loads(resp.read()))
