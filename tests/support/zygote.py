"""`anneal serve` forked from a process that imported it once (tests only; `make test`'s CPU).

Every start of `anneal serve` paid an interpreter start and the imports of SQLAlchemy,
aiohttp, cryptography and the control plane: about 1.2 s of CPU on an idle core, over 300
starts a run (docs/performance.md, "The test suite's own time"). A zygote, one per pytest
worker, imports `anneal serve`'s modules once and forks a child for each start; the child
runs the same entry point (`control.cli.main`) with the test's arguments, environment, log
file and session, as the command would. It is the control plane's real code in a real
process: only the exec is left out. So a test that needs what only an exec gives starts the
command itself (``start_control_plane(..., exec_=True)``, and any start with an interpreter
or loader setting: LD_PRELOAD, PYTHON*, a wrapper command): /proc/PID/environ and cmdline
of a forked child are the zygote's, not its own. `ANNEAL_TEST_ZYGOTE=0` starts every one
with an exec, as before.

The zygote answers on a pipe, one JSON line a request: ``spawn`` forks a child and gives
its PID; ``poll`` reaps it when it ended and gives its exit status as ``Popen.returncode``
would. ``Forked`` is the subset of ``subprocess.Popen`` the tests use on a control plane.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: Extra environment that must reach the interpreter or the loader at exec: a fork cannot give it.
EXEC_ONLY = ("LD_", "PYTHON", "FAKETIME", "MALLOC")
#: prctl(2)'s option that sets the calling thread's name (the process's comm).
PR_SET_NAME = 15


class Forked:
    """A child of the zygote, answered for as ``subprocess.Popen`` answers for its own children."""

    def __init__(self, zygote: Zygote, pid: int, args: Sequence[str]) -> None:
        self._zygote, self.pid, self.args = zygote, pid, list(args)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # a reaped PID may be another process's by now
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The pytest worker's side: starts the zygote on first use and talks to it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def spawn(
        self, argv: Sequence[str], log: Path, env: Mapping[str, str], err: Path | None = None
    ) -> Forked:
        """Fork `anneal *argv[1:]*` (argv[0] is the command's path) with *env*, its output to *log*
        (its stderr too, unless *err* is given)."""
        request = {
            "op": "spawn",
            "argv0": argv[0],
            "argv": list(argv[1:]),
            "log": str(log),
            "err": str(err or log),
            "env": dict(env),
            "cwd": os.getcwd(),
        }
        answer = self._ask(request)
        return Forked(self, int(answer["pid"]), argv)

    def run(
        self, argv: Sequence[str], env: Mapping[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """``subprocess.run(argv, env=env, text=True, capture_output=True, timeout=timeout)``, forked."""
        with tempfile.TemporaryDirectory(prefix="anneal-run-") as tmp:
            out, err = Path(tmp, "out"), Path(tmp, "err")
            proc = self.spawn(argv, out, env, err)
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text()) from None
            return subprocess.CompletedProcess(list(argv), code, out.read_text(), err.read_text())

    def returncode(self, pid: int) -> int | None:
        code = self._ask({"op": "poll", "pid": pid})["returncode"]
        return None if code is None else int(code)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the zygote (PID {proc.pid}) ended: exit status {proc.wait()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"the zygote refused {request['op']}: {answer['error']}")
        return answer

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.zygote"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=Path(__file__).resolve().parents[2],
            )
        return self._proc

    def close(self) -> None:
        """End the zygote (its stdin closes); the children it forked run on."""
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.close()
            self._proc.wait(30)
            self._proc.stdout.close()


ZYGOTE = Zygote()
#: What a test holds of a process it started: its own child, or the zygote's.
Process = subprocess.Popen[bytes] | Forked


def forkable(argv: Sequence[str], env: Mapping[str, str] | None = None, wrap: Sequence[str] = ()) -> bool:
    """Whether a start of *argv* can be forked: this tree's `anneal` (the zygote imported it), in a
    test (a bench or the demo measures or shows the command itself), with no wrapper command and
    nothing in *env* for the interpreter or the loader."""
    if argv[0] != str(Path(sys.executable).parent / "anneal") or wrap:
        return False
    if "PYTEST_CURRENT_TEST" not in os.environ or os.environ.get("ANNEAL_TEST_ZYGOTE", "1") == "0":
        return False
    return not any(k.startswith(EXEC_ONLY) for k in env or {})


# The zygote's side: `python -m tests.support.zygote`, started by Zygote above.


def _serve_forever(requests: IO[bytes], answers: IO[bytes]) -> None:
    ended: dict[int, int] = {}
    for line in requests:
        request = json.loads(line)
        try:
            if request["op"] == "spawn":
                answer: dict[str, Any] = {"pid": _fork(request)}
            else:
                answer = {"returncode": _reaped(int(request["pid"]), ended)}
        except OSError as e:
            answer = {"error": str(e)}
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


def _reaped(pid: int, ended: dict[int, int]) -> int | None:
    if pid not in ended:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            raise OSError(f"PID {pid} is not a child of this zygote") from None
        if done == 0:
            return None
        ended[pid] = os.waitstatus_to_exitcode(status)
    return ended[pid]


def _fork(request: dict[str, Any]) -> int:
    out, err = (os.open(request[k], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) for k in ("log", "err"))
    pid = os.fork()
    if pid:
        os.close(out)
        os.close(err)
        return pid
    code = 70
    try:  # the child never returns to the zygote's loop
        _become(request, out, err)
        from control.cli import main

        code = _exit_code(main, request["argv"])
        # What the interpreter's exit does that a program can see: its threads joined, atexit
        # run (logging's flush among them), stdio flushed. Not the teardown of every module
        # and object the zygote imported, which took 0.5 s of CPU a process (0.14 s frozen).
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    finally:
        os._exit(code)


def _exit_code(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """*main*'s exit status, as the interpreter makes it of a return, a SystemExit or an uncaught exception."""
    try:
        return main(argv)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1


def _become(request: dict[str, Any], out: int, err: int) -> None:
    """In the child: what `Popen(argv, stdout=log, stderr=err, start_new_session=True, env=env, cwd=cwd)` gives."""
    os.setsid()
    # Named as the exec'd command is (/proc/PID/comm, ps, process accounting: bench/suite_cpu.py).
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, b"anneal", 0, 0, 0)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a new interpreter
    os.chdir(request["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.closerange(3, 2**16)  # the zygote's pipes: the child holds only its own stdio
    os.environ.clear()
    os.environ.update(request["env"])
    # Encoded as the zygote's own stdio: what an interpreter started the same way chose.
    enc, errors = sys.__stdout__.encoding, sys.__stdout__.errors  # type: ignore[union-attr]
    sys.stdin = open(0, encoding=enc, errors=errors, closefd=False)  # noqa: SIM115 (the process's own stdio)
    sys.stdout = open(1, "w", encoding=enc, errors=errors, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding=enc, errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.argv = [request["argv0"], *request["argv"]]


def _warm() -> None:
    """Import what `anneal serve` imports before it answers, once for every child (all but ~10 ms
    of it: `python -X importtime -m control.cli serve` against this function's)."""
    import aiosqlite  # noqa: F401
    import alembic.command
    import alembic.config  # noqa: F401

    import control.cli
    import control.cli.serve
    import control.provision  # noqa: F401


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the run is the pytest worker's to handle
    _warm()
    gc.freeze()  # what the zygote imported is never collected: the children's collections skip it
    _serve_forever(sys.stdin.buffer, sys.stdout.buffer)
