"""The simulated agents of bench/scale.py: each signals a new generation and, refused, does what the agent does.

The real agent (agent/outbox.py) keeps a result's signal until it is taken: a refusal in
``FINAL_REFUSALS`` (400, 403, 404, 409 stale, 410 gone, 413) drops it for good; anything
else (503 busy, a 500, no answer) is sent again after ``backoff`` (2 s doubling, jittered,
capped at the agent's ``backoff_max``). These agents call the function the signal route
calls, so each exception is mapped to the status that route would answer
(control/api/middleware.py ``errors``), and the same rule applies. The agent retries
forever; here each signal gives up after ``MAX_ATTEMPTS``, counted apart, so no loop is
unbounded.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm.exc import StaleDataError

from agent.outbox import FINAL_REFUSALS
from agent.transports.switch import backoff
from control.errors import ControlError

#: The agent's default ``backoff_max`` (agent/config.py): the longest wait between two tries.
BACKOFF_MAX = 60.0
#: Tries of one signal before the bench gives up on it (about 9 minutes of waits at the cap).
MAX_ATTEMPTS = 14
#: Distinct refusal reasons kept for the report.
REASONS_KEPT = 20

Signal = Callable[[str, int, str], Awaitable[Any]]


def status_of(e: Exception) -> int:
    """The status ``POST /v1/signal/...`` answers for *e* raised by ``record_signal``."""
    if isinstance(e, ControlError):
        return e.status
    if isinstance(e, IntegrityError):
        return 409
    if isinstance(e, OperationalError | StaleDataError):
        return 503  # with Retry-After: 5; a full disk is a 503 too (disk_full)
    return 500  # a bug: the route logs it


class SimAgents:
    """Workers that send each signal queued, and queue a refused one again as the agent's outbox does."""

    def __init__(self, signal: Signal, workers: int) -> None:
        self._signal = signal
        self._queue: asyncio.Queue[tuple[str, int, str, int]] = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._work()) for _ in range(workers)]
        self._waiting: set[asyncio.Task[None]] = set()
        #: signalled: taken; retries: tries sent again; final: refused for good; gave_up: MAX_ATTEMPTS reached.
        self.counts = {"signalled": 0, "retries": 0, "final": 0, "gave_up": 0}
        #: "status ExceptionType: message" -> how many times it was answered.
        self.reasons: collections.Counter[str] = collections.Counter()
        self._marked: dict[str, int] = {}

    def put(self, found: tuple[str, int, str]) -> None:
        """A new generation seen in a document: signal it (first try)."""
        self._queue.put_nowait((*found, 1))

    def pending(self) -> int:
        """Signals queued or waiting out a backoff."""
        return self._queue.qsize() + len(self._waiting)

    def phase(self) -> dict[str, int]:
        """What the agents did since the last call (one phase of the run), and how many still wait."""
        now = dict(self.counts)
        done = {k: v - self._marked.get(k, 0) for k, v in now.items()}
        self._marked = now
        return {**done, "pending": self.pending()}

    async def close(self) -> None:
        """Stop the workers and drop the signals still waiting (the run is over)."""
        for task in [*self._tasks, *self._waiting]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._waiting, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            dep_id, gen, sig, attempt = await self._queue.get()
            try:
                await self._signal(dep_id, gen, sig)
            except Exception as e:  # each is answered as the route would answer it
                self._refused(e, (dep_id, gen, sig, attempt))
            else:
                self.counts["signalled"] += 1

    def _refused(self, e: Exception, item: tuple[str, int, str, int]) -> None:
        status = status_of(e)
        said = str(getattr(e, "orig", None) or e)  # the driver's own words ("database is locked")
        reason = f"{status} {type(e).__name__}: {said.splitlines()[0][:120] if said else ''}"
        if reason in self.reasons or len(self.reasons) < REASONS_KEPT:
            self.reasons[reason] += 1
        if status in FINAL_REFUSALS:
            self.counts["final"] += 1
            return
        if item[3] >= MAX_ATTEMPTS:
            self.counts["gave_up"] += 1
            return
        self.counts["retries"] += 1
        task = asyncio.create_task(self._again(backoff(item[3], BACKOFF_MAX), item))
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

    async def _again(self, delay: float, item: tuple[str, int, str, int]) -> None:
        await asyncio.sleep(delay)
        self._queue.put_nowait((*item[:3], item[3] + 1))
