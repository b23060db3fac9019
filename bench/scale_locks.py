"""Who holds SQLite's write lock in a bench/scale.py child, and who waits for it (``SCALE_LOCKS=1``).

A write transaction holds the database's write lock from its first INSERT, UPDATE or
DELETE (the driver's deferred BEGIN) to its commit or rollback. For each transaction the
hold is timed and named by the coroutine at the top of the task that ran it and its first
write; each write statement's own time is the waiting side (a busy wait is spent inside
it); a failed statement ("database is locked") is kept with its task and statement.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

#: How many of the longest holds and waits are kept.
KEPT = 12
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


class LockWatch:
    """Write-lock holds, write statements' waits and lock failures of one engine's connections."""

    def __init__(self, engine: Engine) -> None:
        self.holds: list[tuple[float, str]] = []
        self.waits: list[tuple[float, str]] = []
        self.failures: list[str] = []
        self.over = {"holds_over_5s": 0, "waits_over_5s": 0}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        event.listen(engine, "commit", self._end)
        event.listen(engine, "rollback", self._end)
        event.listen(engine, "handle_error", self._error)

    def _before(self, conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip()[:7].upper().startswith(_WRITES):
            conn.info.setdefault("anneal_write", (time.monotonic(), f"{_who()}: {statement[:70]}"))
            conn.info["anneal_stmt"] = time.monotonic()

    def _after(self, conn: Any, *_: Any) -> None:
        started = conn.info.pop("anneal_stmt", None)
        if started is not None:
            waited = time.monotonic() - started
            self.over["waits_over_5s"] += waited > 5
            _keep(self.waits, waited, conn.info["anneal_write"][1])

    def _end(self, conn: Any) -> None:
        first = conn.info.pop("anneal_write", None)
        conn.info.pop("anneal_stmt", None)
        if first is not None:
            held = time.monotonic() - first[0]
            self.over["holds_over_5s"] += held > 5
            _keep(self.holds, held, first[1])

    def _error(self, context: Any) -> None:
        if len(self.failures) < KEPT:
            statement = (context.statement or "")[:70]
            self.failures.append(f"{_who()}: {context.original_exception} on {statement}")

    def report(self) -> dict[str, Any]:
        """The longest holds and waits, the counts over 5 s, the first failures."""
        return {**self.over, "holds": self.holds, "waits": self.waits, "failures": self.failures}
