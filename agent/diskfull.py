"""A full state dir: the agent waits for space and carries on, instead of exiting.

A write that fails with ENOSPC or EDQUOT (or SQLite's "database or disk is full") is not a
crash. The agent keeps what it could not write in memory, says so in one line naming the
state dir and the write, reports the condition (heartbeat, ``anneal-agent status``) and
tries again with a backoff that doubles up to ``BACKOFF_MAX``. No hook starts while the
state dir has less than ``MIN_FREE_BYTES`` free: a hook's script, outputs and ledger
entries live there. SQLite's transactions and ``fsutil.write_atomic`` keep every state file
whole, so a failed write leaves the old state, never half a new one.

``anneal-agent status`` runs in another process and the disk is full, so the condition goes
to ``condition.json``, a file of ``CONDITION_BYTES`` allocated at start and rewritten in
place (a full filesystem still lets a file's own blocks be overwritten; copy-on-write
filesystems such as btrfs may not).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agent.errors import AgentError

log = logging.getLogger(__name__)
T = TypeVar("T")
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: SQLite's "full", and the "disk I/O error" it gives when opening a WAL database on a full disk
#: (its shared-memory file cannot be given its size).
SQLITE_FULL_CODES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR_SHMSIZE})
#: No hook starts while the state dir has less than this free.
MIN_FREE_BYTES = 64 * 1024
#: The longest wait between two tries once the disk is full.
BACKOFF_MAX = 30.0
CONDITION_FILE = "condition.json"
CONDITION_BYTES = 4096


class DiskFullError(AgentError):
    """The state dir is full and this command does not wait (``anneal-agent once``)."""


def is_full(e: BaseException) -> bool:
    """True when *e* (or what caused it) says the disk or the quota is full."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in FULL_ERRNOS:
            return True
        if isinstance(cause, sqlite3.Error) and (
            getattr(cause, "sqlite_errorcode", None) in SQLITE_FULL_CODES or "disk is full" in str(cause)
        ):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    # root may use the blocks reserved for it; anyone else only the available ones
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def reason(e: BaseException) -> str:
    if isinstance(e, OSError):
        where = f" ({e.filename})" if e.filename else ""
        return f"{e.strerror or e}{where}"
    return str(e)


class DiskWatch:
    """The full-disk condition of one state dir: noted, shown, reported, and waited out."""

    def __init__(
        self, state_dir: Path, *, wait: bool = True, on_change: Callable[[], None] | None = None
    ) -> None:
        self.state_dir = state_dir
        #: False for one-pass commands: a full disk ends them with DiskFullError instead.
        self.wait = wait
        self.on_change = on_change
        self.condition: dict[str, Any] | None = None
        self._told: set[str] = set()
        self._fd: int | None = None

    # ------------------------------------------------------------ condition file

    def open(self) -> None:
        """Allocate ``condition.json`` now, while there may still be room, and clear it."""
        path = self.state_dir / CONDITION_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            log.warning("cannot keep the disk condition in %s: %s", path, reason(e))
            return
        try:
            os.posix_fallocate(fd, 0, CONDITION_BYTES)
        except OSError as e:
            log.warning("cannot allocate %s: %s", path, reason(e))
            os.close(fd)
            return
        self._fd = fd
        self._write()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self) -> None:
        if self._fd is None:
            return
        text = json.dumps({"pid": os.getpid(), "disk_full": self.condition}).encode()[: CONDITION_BYTES - 1]
        try:
            os.pwrite(self._fd, text.ljust(CONDITION_BYTES - 1) + b"\n", 0)
        except OSError as e:
            log.warning("cannot update %s: %s", self.state_dir / CONDITION_FILE, reason(e))

    # ------------------------------------------------------------ the condition

    def message(self, what: str, e: BaseException | None) -> str:
        why = f" ({reason(e)})" if e is not None else ""
        return f"state dir {self.state_dir} is full{why}: could not {what}"

    def note(self, what: str, e: BaseException | None, tries: int = 1, kind: str = "write") -> None:
        """Record that *what* could not be written; one log line when it starts or changes.

        Without ``wait`` this raises DiskFullError with that line instead of waiting.
        """
        text = self.message(what, e)
        began = self.condition is None
        if began:
            log.error("%s; %s", text, "retrying until space returns" if self.wait else "giving up")
            self._told = {what}
        elif what not in self._told:  # several writes wait at once: each is named once
            log.error("%s; retrying until space returns", text)
            self._told.add(what)
        since = time.time() if self.condition is None else self.condition["since"]
        self.condition = {
            "state_dir": str(self.state_dir),
            "what": what,
            "message": text,
            "since": since,
            "tries": tries,
            "kind": kind,
        }
        self._write()
        if began and self.on_change is not None:
            self.on_change()
        if not self.wait:
            raise DiskFullError(text) from e

    def wrote(self) -> None:
        """A write went through: a condition noted for a failed write is over."""
        if self.condition is not None and self.condition["kind"] == "write":
            self.clear()

    def clear(self) -> None:
        if self.condition is None:
            return
        waited = time.time() - self.condition["since"]
        log.warning("state dir %s has space again after %.0f s: carrying on", self.state_dir, waited)
        self.condition = None
        self._write()
        if self.on_change is not None:
            self.on_change()

    @staticmethod
    def delay(tries: int) -> float:
        return min(BACKOFF_MAX, 2.0 ** min(tries - 1, 10)) * random.uniform(0.75, 1.0)

    # ------------------------------------------------------------ waiting it out

    async def retry(self, what: str, write: Callable[[], T]) -> T:
        """Call *write* until it does not fail for a full disk (other errors pass through)."""
        tries = 0
        while True:
            try:
                result = write()
            except Exception as e:
                if not is_full(e):
                    raise
                tries += 1
                self.note(what, e, tries)
                await asyncio.sleep(self.delay(tries))
                continue
            if tries:
                self.clear()
            return result

    async def keep_running(
        self, loop: Callable[[], Awaitable[None]], doing: str, wake: Callable[[], None]
    ) -> None:
        """Run *loop* (a task that never returns); when a write of it finds the disk full, wait and
        start it again (after calling *wake*). Other errors pass through."""
        tries = 0
        while True:
            try:
                await loop()
            except Exception as e:
                if not is_full(e):
                    raise
                tries += 1
                self.note(f"write its state while {doing}", e, tries)
                await asyncio.sleep(self.delay(tries))
                wake()

    def unless_full(self, what: str, write: Callable[[], object]) -> None:
        """Call *write*; on a full disk, log that *what* was left out and go on (for what may be lost)."""
        try:
            write()
        except Exception as e:
            if not is_full(e):
                raise
            log.warning("%s; going on without it", self.message(what, e))

    def give_up(self, e: BaseException) -> DiskFullError | None:
        """For commands that do not wait: the error to end with when *e* is a full disk, else None."""
        if isinstance(e, DiskFullError):
            return e
        if not is_full(e):
            return None
        if self.condition is None:
            with contextlib.suppress(DiskFullError):
                self.note("write its state", e)
        return DiskFullError(self.message("write its state", e))

    async def room_for(self, what: str) -> None:
        """Return once the state dir has ``MIN_FREE_BYTES`` free (at once when it has)."""
        tries = 0
        while (free := free_bytes(self.state_dir)) < MIN_FREE_BYTES:
            tries += 1
            self.note(f"{what}: {free} bytes free, a hook needs {MIN_FREE_BYTES}", None, tries, kind="room")
            await asyncio.sleep(self.delay(tries))
        if tries:
            self.clear()


def read_condition(state_dir: Path) -> dict[str, Any] | None:
    """The condition a running agent last wrote, for `status`; None when none or no agent runs."""
    try:
        raw = json.loads((state_dir / CONDITION_FILE).read_bytes() or b"{}")
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not raw.get("disk_full"):
        return None
    try:
        os.kill(int(raw["pid"]), 0)
    except (ProcessLookupError, TypeError, ValueError):
        return None  # written by an agent that is gone
    except PermissionError:
        pass  # alive, another user's
    return dict(raw["disk_full"])
