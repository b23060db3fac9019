"""Where an unclosed asyncio StreamWriter was made, in the ResourceWarning that reports it.

A writer nobody closed is found only when the garbage collector takes it, often in a
later test of the same worker (a heavy one that allocates enough to start a full
collection): CI saw ``unclosed <StreamWriter ...>`` fail test_fleet_store_outage three
times, a test that passes alone every time, with nothing naming the writer's maker.
Tracing every allocation (``-X tracemalloc``) slows the suite several-fold; this
records the stack of each StreamWriter's creation only (a few hundred per run) and
puts it in the warning, which still fails the test as before.
"""

from __future__ import annotations

import asyncio
import traceback
import warnings
from typing import Any

#: Frames of the creating stack kept (the innermost, asyncio's own, dropped).
FRAMES = 14


def trace_stream_writers() -> None:
    """Record where each asyncio.StreamWriter is made; name it in the unclosed-writer warning."""
    cls: Any = asyncio.StreamWriter
    if getattr(cls, "_anneal_traced", False):
        return
    made = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self._anneal_made_at = "".join(traceback.format_stack(limit=FRAMES)[:-2])

    def collected(self: Any) -> None:
        if self._transport.is_closing():
            return
        where = getattr(self, "_anneal_made_at", "(not recorded)")
        if self._loop.is_closed():
            warnings.warn(f"loop is closed; the writer was made at:\n{where}", ResourceWarning, stacklevel=1)
            return
        self.close()
        warnings.warn(f"unclosed {self!r}, made at:\n{where}", ResourceWarning, stacklevel=1)

    cls.__init__ = init
    cls.__del__ = collected
    cls._anneal_traced = True
