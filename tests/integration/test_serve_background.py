"""`anneal serve --background` returns once the control plane listens; `--stop` ends it; a failed start says why."""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from pathlib import Path

from tests.support.processes import command, free_port


def _anneal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [command("anneal"), *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_background_serve_answers_on_return_and_stops_on_request(tmp_path: Path) -> None:
    """On return the token is written and the API answers; a second start is refused; --stop ends it and its PID file."""
    data, port = tmp_path / "data", free_port()
    started = _anneal("serve", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}", "--background")
    assert 0 == started.returncode, started
    pid = int((data / "serve.pid").read_text())
    try:
        assert f"running as pid {pid}" in started.stdout
        token = (data / "admin-token").read_text().strip()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/stacks", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert 200 == resp.status
        again = _anneal("serve", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}", "--background")
        assert 1 == again.returncode and f"already running as pid {pid}" in again.stderr
    finally:
        stopped = _anneal("serve", "--stop", "--data-dir", str(data))
    assert 0 == stopped.returncode and "stopped" in stopped.stdout, stopped
    assert not Path(f"/proc/{pid}").exists() and not (data / "serve.pid").exists()
    assert 1 == _anneal("serve", "--stop", "--data-dir", str(data)).returncode


def test_background_serve_that_cannot_listen_exits_with_the_reason(tmp_path: Path) -> None:
    """A port already taken: --background exits non-zero with the end of the control plane's log, no PID file left."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = _anneal(
            "serve", "--data-dir", str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}", "--background"
        )
    assert 0 != started.returncode
    assert "while starting" in started.stderr and "address already in use" in started.stderr.lower(), (
        started.stderr
    )
    assert not (tmp_path / "data" / "serve.pid").exists()
