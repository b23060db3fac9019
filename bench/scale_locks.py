"""Who holds SQLite's write lock in a bench/scale.py child, and who waits for it (``SCALE_LOCKS=1``).

A write transaction holds the database's write lock from its first INSERT, UPDATE or
DELETE (the driver's deferred BEGIN) to its commit or rollback. For each transaction the
hold (from the end of that first write: its busy wait is not a hold) is timed and named by
the coroutine at the top of the task that ran it, its first write and its statement count;
each write statement's own time is the waiting side (a busy wait is spent inside it); a
failed statement ("database is locked") is kept with its task and statement.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.engine import Engine

#: How many of the longest holds and waits are kept.
KEPT = 12
#: Seconds without a callback run that count as a stall of the event loop.
STALL = 1.0
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def _who() -> str:
    task = asyncio.current_task()
    if task is None:
        return "?"
    coro = task.get_coro()
    return getattr(coro, "__qualname__", None) or task.get_name()


def _keep(top: list[tuple[float, str]], seconds: float, what: str) -> None:
    top.append((round(seconds, 3), what))
    top.sort(reverse=True)
    del top[KEPT:]


def watch(engine: Engine) -> LockWatch | None:
    """The watch when ``SCALE_LOCKS`` is set; ``SCALE_BUSY_MS`` also shortens SQLite's busy timeout.

    The product waits 10 s for the lock (control/store/db.py); a shorter wait makes the
    refusals a loaded machine gives (503 over HTTP) frequent enough to see the agents' retries.
    """
    busy = os.environ.get("SCALE_BUSY_MS")
    if busy:
        event.listen(
            engine, "connect", lambda conn, _record: conn.execute(f"PRAGMA busy_timeout={int(busy)}")
        )
    if not os.environ.get("SCALE_LOCKS"):
        return None
    found = LockWatch(engine)
    threading.Thread(
        target=found.stalls, args=(threading.get_ident(), asyncio.get_running_loop()), daemon=True
    ).start()
    return found


class LockWatch:
    """Write-lock holds, write statements' waits and lock failures of one engine's connections."""

    def __init__(self, engine: Engine) -> None:
        self.holds: list[tuple[float, str]] = []
        self.waits: list[tuple[float, str]] = []
        self.failures: list[str] = []
        #: Where the loop's thread was (its innermost control/ frames) -> the longest stall seen there.
        self.stalled: dict[str, float] = {}
        self.over = {"holds_over_5s": 0, "waits_over_5s": 0}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        event.listen(engine, "commit", self._end)
        event.listen(engine, "rollback", self._end)
        event.listen(engine, "handle_error", self._error)

    def _before(self, conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip()[:7].upper().startswith(_WRITES):
            conn.info["anneal_stmt"] = (time.monotonic(), f"{_who()}: {statement[:70]}")
        if "anneal_write" in conn.info:
            conn.info["anneal_write"][2] += 1

    def _after(self, conn: Any, *_: Any) -> None:
        started = conn.info.pop("anneal_stmt", None)
        if started is None:
            return
        now = time.monotonic()
        waited = now - started[0]  # a busy wait for the lock is spent in the statement
        self.over["waits_over_5s"] += waited > 5
        _keep(self.waits, waited, started[1])
        # The lock is this connection's from the end of its first write (the wait is not a hold).
        conn.info.setdefault("anneal_write", [now, started[1], 1])

    def _end(self, conn: Any) -> None:
        try:
            info = conn.info
        except exc.SQLAlchemyError:  # a connection invalidated (cancelled at shutdown): nothing to time
            return
        first = info.pop("anneal_write", None)
        info.pop("anneal_stmt", None)
        if first is not None:
            held = time.monotonic() - first[0]
            label = f"{first[1]} ({first[2]} statements)"
            self.over["holds_over_5s"] += held > 5
            if held > 5:  # at once: a run stopped later keeps it
                print(f"{time.strftime('%H:%M:%S')} write lock held {held:.1f} s by {label}", file=sys.stderr)
            _keep(self.holds, held, label)

    def _error(self, context: Any) -> None:
        if len(self.failures) < KEPT:
            statement = (context.statement or "")[:70]
            self.failures.append(f"{_who()}: {context.original_exception} on {statement}")

    def stalls(self, loop_thread: int, loop: asyncio.AbstractEventLoop) -> None:
        """(A daemon thread.) Where the event loop's thread is while the loop runs no callback for over STALL s.

        A transaction holding the write lock waits for the loop to resume it: what keeps the
        loop from it keeps the lock held, and the other writers wait in their threads.
        """
        beat = [time.monotonic()]
        while not loop.is_closed():
            try:
                loop.call_soon_threadsafe(lambda: beat.__setitem__(0, time.monotonic()))
            except RuntimeError:  # the loop closed between the check and the call
                return
            time.sleep(STALL / 4)
            stalled = time.monotonic() - beat[0]
            frame = sys._current_frames().get(loop_thread)
            if stalled > STALL and frame is not None:
                ours = [f for f in traceback.extract_stack(frame) if "/control/" in f.filename][-4:]
                where = " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(ours))
                self.stalled[where] = max(self.stalled.get(where, 0.0), round(stalled, 2))

    def report(self) -> dict[str, Any]:
        """The longest holds and waits, the counts over 5 s, the first failures, where the loop stalled."""
        top = sorted(self.stalled.items(), key=lambda kv: -kv[1])[:KEPT]
        return {
            **self.over,
            "holds": self.holds,
            "waits": self.waits,
            "failures": self.failures,
            "stalls": top,
        }
