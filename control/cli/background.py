"""`anneal serve --background` and `anneal serve --stop`: the control plane detached from the shell.

`--background` starts `anneal serve` again as its own session with `--pid-file`, its output
in `<data dir>/serve.log`, and returns once that process listens (it writes the PID file
only then), so the next command finds the admin token and the port ready. `--stop` sends
SIGTERM to the process the PID file names, if it is that control plane, and waits for it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: How long --background waits for the control plane to listen, and --stop for it to exit.
WAIT = 120.0


def pid_file(args: argparse.Namespace) -> Path:
    return Path(args.pid_file).resolve() if args.pid_file else args.data_dir.resolve() / "serve.pid"


def start(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Start `anneal serve *argv*` (without --background) detached; 0 once it listens."""
    pids, data_dir = pid_file(args), args.data_dir.resolve()
    running = _serving(pids)
    if running:
        print(f"anneal serve: already running as pid {running} ({pids})", file=sys.stderr)
        return 1
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    pids.unlink(missing_ok=True)
    log = data_dir / "serve.log"
    child = [a for a in argv if not _abbreviates(a, "--background")]
    with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "control.cli", *child, "--pid-file", str(pids)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a closed terminal's SIGHUP must not reach it
        )
    deadline = time.monotonic() + WAIT
    while _read(pids) != proc.pid:
        if proc.poll() is not None:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
            print(
                f"anneal serve: exited with status {proc.returncode} while starting:\n{tail}", file=sys.stderr
            )
            return proc.returncode or 1
        if time.monotonic() > deadline:
            print(
                f"anneal serve: not listening after {WAIT:g} s (pid {proc.pid}); see {log}", file=sys.stderr
            )
            return 1
        time.sleep(0.1)
    print(f"anneal serve: running as pid {proc.pid}, log in {log}; stop it with: anneal serve --stop", end="")
    print(f" --data-dir {data_dir}" if not args.pid_file else f" --pid-file {pids}")
    return 0


def stop(args: argparse.Namespace) -> int:
    """SIGTERM the control plane the PID file names and wait until it has exited."""
    pids = pid_file(args)
    pid = _serving(pids)
    if pid is None:
        print(f"anneal serve: no control plane to stop ({pids} names none running)", file=sys.stderr)
        return 1
    print(f"anneal serve: stopping pid {pid} (held requests answered, local agents stopped)", flush=True)
    began = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + WAIT
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            print(f"anneal serve: pid {pid} still running after {WAIT:g} s", file=sys.stderr)
            return 1
        time.sleep(0.1)
    pids.unlink(missing_ok=True)
    print(f"anneal serve: stopped in {time.monotonic() - began:.1f} s")
    return 0


def announce(path: Path) -> Callable[..., None]:
    """For web.run_app's *print*, called once the sites listen: write this process's PID to *path*."""

    def listening(*_: object) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"{os.getpid()}\n")
        tmp.replace(path)

    return listening


def forget(path: Path) -> None:
    """At exit: remove *path* if it still names this process."""
    if _read(path) == os.getpid():
        path.unlink(missing_ok=True)


def _serving(path: Path) -> int | None:
    """The PID in *path* if that process is an `anneal serve` writing this PID file (a PID can be reused)."""
    pid = _read(path)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if pid else []
    except OSError:
        return None
    return pid if b"serve" in cmdline and str(path).encode() in cmdline else None


def _read(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _abbreviates(arg: str, option: str) -> bool:
    """argparse takes any unambiguous prefix of a long option."""
    return arg.startswith("--") and len(arg) > 2 and option.startswith(arg)
