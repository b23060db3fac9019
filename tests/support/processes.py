"""Where the installed commands and the examples are, free loopback ports, and stopping what a test started."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.zygote import Process

#: The venv's console scripts (`anneal`, `anneal-agent`) sit next to this interpreter.
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def command(name: str) -> str:
    """An installed console script: next to this interpreter (the venv) first, else on PATH."""
    local = BIN / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise AssertionError(f"{name} is neither in {BIN} nor on PATH: run `make install`")
    return found


#: Loopback ports the test workers choose from: below the kernel's ephemeral range (32768 and
#: up here), so no port the kernel hands out (bind to 0, a client's side) lands in it.
PORTS = range(20000, 32000)
#: The most pytest-xdist workers the range is split for (a worker past it shares a slice).
WORKERS = 16
_next: dict[str, int] = {}


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now, on *host*, and no other test worker will choose.

    Under pytest-xdist each worker takes its ports from its own slice of PORTS, in turn,
    so two tests running side by side never pick the same one between choosing it and
    binding it (with the kernel's choice they did: another test's server then answered).
    Outside xdist (bench, demo) the kernel chooses.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return _bindable(host, 0)
    size = len(PORTS) // WORKERS
    first = PORTS.start + size * (int(worker[2:]) % WORKERS)
    for _ in range(size):
        at = _next.get(host, 0)
        _next[host] = (at + 1) % size
        with contextlib.suppress(OSError):
            return _bindable(host, first + at)
    raise AssertionError(f"no free port in {first}-{first + size - 1} on {host}")


def _bindable(host: str, port: int) -> int:
    """*port* (the kernel's choice for 0) once a socket could bind it on *host*."""
    with socket.socket() as s:
        s.bind((host, port))
        return int(s.getsockname()[1])


def stop_process(proc: Process | None, grace: float = 30) -> None:
    """SIGTERM a process this run started (by its PID); SIGKILL it if it is still there after *grace* s."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_all(procs: Sequence[Process], grace: float = 20) -> None:
    """SIGTERM every one of *procs* first (they stop side by side), then SIGKILL each still there after *grace* s.

    One SIGTERM each: a second one tells an agent to stop at once, without its running hook.
    """
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
