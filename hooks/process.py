"""Running a tool: its own session, output streamed as it comes, a deadline for the whole tree.

``run_tool`` copies the tool's stdout and stderr, as they arrive, to an ``Echo`` (the hook's
stderr, which the agent reads for progress, and a copy of stdout alone for crash recovery)
and keeps each capped, head and tail.
At the deadline the tool's process tree and its process group are stopped: SIGTERM, then
SIGKILL after ``KILL_GRACE`` seconds. Children that made sessions of their own (pexpect,
daemons started by the tool) are found through ``/proc`` before the tool's parent goes away.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent import wire_caps
from agent.proctree import descendants, stat_fields

logger = logging.getLogger(__name__)

STATUS_NOT_FOUND = 127
STATUS_NOT_EXECUTABLE = 126
STATUS_TIMED_OUT = 124
#: Seconds between SIGTERM and SIGKILL when a tool's processes are stopped.
KILL_GRACE = 5.0
#: Seconds to collect the last output once the tool is stopped.
DRAIN_GRACE = 1.0
_CHUNK = 65536


class _Held:
    """A stop (the hook's SIGTERM) that came while a tool was starting, kept until its process is
    known: raised in the middle of ``Popen`` or just after, it would leave the tool running alone."""

    starting = False
    stop: BaseException | None = None


def hold(stop: BaseException) -> bool:
    """For the hook's SIGTERM handler: keep *stop* if a tool is starting (True), else raise it (False)."""
    if _Held.starting:
        _Held.stop = stop
    return _Held.starting


def _release() -> None:
    """The start is over: raise a stop held meanwhile, now that the tool's tree can be stopped."""
    _Held.starting = False
    stop, _Held.stop = _Held.stop, None
    if stop is not None:
        raise stop


@dataclass(frozen=True)
class ToolResult:
    """How a tool ended: its status and its output, decoded and trimmed."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


class Capture:
    """The bytes of one stream, at most *cap*: the head and the tail are kept, the middle cut."""

    def __init__(self, cap: int = wire_caps.MAX_STREAM_BYTES) -> None:
        self.half = cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.half:  # trim now and then, not on every chunk
            del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        tail = bytes(self.tail[-self.half :]) if self.half else b""
        cut = self.total - len(self.head) - len(tail)
        if cut <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        head = bytes(self.head).decode("utf-8", "ignore")
        return f"{head}\n[... {cut} bytes cut ...]\n{tail.decode('utf-8', 'ignore')}"


@dataclass(frozen=True)
class Echo:
    """Where a tool's output is copied as it comes.

    Both streams go to *stream* (the hook's stderr, which the agent reads for progress and
    keeps for crash recovery); stdout also goes to *stdout_copy* (a file the agent names in
    ``ANNEAL_HOOK_STDOUT_COPY``), so what the tool printed survives an agent crash as stdout.
    """

    stream: IO[bytes] | None = None
    stdout_copy: IO[bytes] | None = None

    def write(self, key: str, chunk: bytes) -> None:
        if self.stream is not None:
            _echo(self.stream, chunk)
        if key == "out" and self.stdout_copy is not None:
            _echo(self.stdout_copy, chunk)


def run_tool(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float | None,
    stdin: bytes | None = None,
    echo: Echo | None = None,
) -> ToolResult:
    """Run *argv* in a session of its own; after *timeout* seconds stop its whole tree.

    A program that cannot be started gives status 127 (126 for other exec errors); a
    timeout gives 124. Background processes that outlive the tool are left alone unless
    they still hold its output open at the timeout: then they are stopped too.
    """
    _Held.starting = True
    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except BaseException as e:
        _release()
        if isinstance(e, OSError):
            return not_started(argv, e)
        raise
    out, err = Capture(), Capture()
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        _release()  # a stop held while the tool started is raised here, where its tree is stopped
        if stdin is not None and proc.stdin is not None:
            _feed(proc.stdin, stdin)
        finished = _pump(proc, {"out": out, "err": err}, deadline, echo)
    except BaseException:
        _stop_tree(proc)
        _close(proc)
        raise
    if finished:
        _close(proc)  # both at end of file: closed here, not left to the garbage collector
        return tool_result(proc.wait(), out, err)
    exited = proc.poll() is not None
    _stop_tree(proc)
    _pump(proc, {"out": out, "err": err}, time.monotonic() + DRAIN_GRACE, echo)
    _close(proc)
    if exited:  # the tool ended, but a process it started kept its output open
        note = f"{argv[0]}: a background process still held the output open after {timeout:g} s"
        return tool_result(proc.wait(), out, err, note + "; it was stopped")
    note = f"{argv[0]} timed out after {timeout:g} s"
    return tool_result(STATUS_TIMED_OUT, out, err, note, timed_out=True)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    # Tools read small inputs (a manifest, a run list): written at once, before reading output.
    with contextlib.suppress(BrokenPipeError):
        pipe.write(data)
    with contextlib.suppress(BrokenPipeError):
        pipe.close()


def _pump(
    proc: subprocess.Popen[bytes],
    captures: Mapping[str, Capture],
    deadline: float | None,
    echo: Echo | None,
) -> bool:
    """Copy output until both pipes close (True) or *deadline* passes (False)."""
    with selectors.DefaultSelector() as sel:
        for key, pipe in (("out", proc.stdout), ("err", proc.stderr)):
            if pipe is not None and not pipe.closed:
                sel.register(pipe, selectors.EVENT_READ, key)
        while sel.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return False
            for ready, _ in sel.select(wait):
                chunk = os.read(ready.fd, _CHUNK)
                if not chunk:
                    sel.unregister(ready.fileobj)
                    continue
                captures[ready.data].add(chunk)
                if echo is not None:
                    echo.write(ready.data, chunk)
    return True


def _echo(echo: IO[bytes], chunk: bytes) -> None:
    try:
        echo.write(chunk)
        echo.flush()
    except (OSError, ValueError):  # nobody reads the hook's stderr any more: keep going
        pass


def _close(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def not_started(argv: Sequence[str], e: OSError) -> ToolResult:
    missing = isinstance(e, FileNotFoundError | PermissionError)
    code = STATUS_NOT_FOUND if missing else STATUS_NOT_EXECUTABLE
    message = f"cannot run {argv[0]!r}: {e.strerror or e}"
    if e.filename is not None and os.fsdecode(e.filename) != argv[0]:
        message += f": {os.fsdecode(e.filename)}"
    return ToolResult(code, "", message)


def _stop_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the tool's tree and group; SIGKILL whatever is left after KILL_GRACE."""
    pids = {proc.pid, *descendants(proc.pid)}
    signal_all(proc.pid, pids, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader: a zombie still counts as a member of the group
        if not alive(proc.pid, pids):
            break
        time.sleep(0.05)
    else:
        signal_all(proc.pid, pids | descendants(proc.pid), signal.SIGKILL)
    proc.wait()


def signal_all(pgid: int, pids: set[int], signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:
        logger.warning("process group %d: not allowed to send signal %d", pgid, signum)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def alive(pgid: int, pids: set[int]) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        pass
    return any((stat := stat_fields(pid)) is not None and stat[0] not in ("Z", "X") for pid in pids)


def tool_result(
    code: int, out: Capture, err: Capture, note: str = "", *, timed_out: bool = False
) -> ToolResult:
    stderr = err.text()
    if note:
        stderr = f"{stderr.rstrip(chr(10))}\n{note}" if stderr else note
    return ToolResult(
        returncode=code,
        stdout=out.text(),
        stderr=wire_caps.trim_stream(stderr),  # the tail, with the note, is kept
        timed_out=timed_out,
    )
