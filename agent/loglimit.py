"""Repeated identical log lines, rate-limited: the first one of a window is logged, the rest counted.

A condition that repeats many times a second (accept() out of descriptors, a retry loop
against a dead database) must not fill the disk with copies of one line and its traceback:
the control plane once wrote 700 MB of them in 50 s. The next copy after the window says how
many were left out. Standard library only: the agent, the relay and the control plane use it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

#: Seconds during which copies of a line are counted instead of logged.
WINDOW = 10.0
#: Distinct lines remembered at most; older ones are forgotten first.
MAX_KEYS = 1000


class RepeatFilter(logging.Filter):
    """Pass the first record of each (logger, level, message) per *window*; count the others."""

    def __init__(
        self,
        window: float = WINDOW,
        exempt: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.window = window
        self.exempt = frozenset(exempt)
        self.clock = clock
        # key -> [start of its window, copies left out in it]
        self._seen: dict[tuple[str, int, str], list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name in self.exempt:
            return True
        try:
            key = (record.name, record.levelno, record.getMessage())
        except Exception:  # a malformed call: let the handler report it as it always does
            return True
        now = self.clock()
        entry = self._seen.get(key)
        if entry is not None and now - entry[0] < self.window:
            entry[1] += 1
            return False
        if entry is not None and entry[1]:
            record.msg = (
                f"{record.getMessage()} (and {int(entry[1])} more like it in the {self.window:g} s before)"
            )
            record.args = None
        self._seen.pop(key, None)
        self._seen[key] = [now, 0]
        if len(self._seen) > MAX_KEYS:
            del self._seen[next(iter(self._seen))]
        return True


def install(window: float = WINDOW, exempt: Iterable[str] = ()) -> RepeatFilter:
    """Put a RepeatFilter on every handler of the root logger (call after logging.basicConfig)."""
    repeat = RepeatFilter(window, exempt)
    for handler in logging.getLogger().handlers:
        handler.addFilter(repeat)
    return repeat
