"""Progress of a running hook: the tail of its output, sent as IN_PROGRESS signals at a bounded rate.

The agent feeds every chunk a hook writes on stderr (our hooks copy their tool's output
there as it comes) to a ``Progress``. Its ``run`` task sends at most one progress signal per
``interval`` seconds, coalescing everything that came in between into the latest tail, and
one every ``heartbeat`` seconds while nothing new is written. Nothing is sent in the first
``grace`` seconds: a hook that ends within them (a no-op, a quick script) is reported by its
result alone, which carries all its output, so its signal is not held up behind progress. A progress signal carries no
``deploy_status_code``: the control plane records it without changing the deployment.
Progress is best effort: one not delivered is never queued; it is tried again (after the interval,
doubling up to the heartbeat) with the newest tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agent.wire import EXTRA_KEY

log = logging.getLogger(__name__)

#: At most one progress signal per deployment in this many seconds.
INTERVAL = 2.0
#: A progress signal this often while the hook is silent (the deployment is still alive).
HEARTBEAT = 15.0
#: Bytes of the output's tail each progress signal carries.
TAIL_BYTES = 8 * 1024
STATUS = "IN_PROGRESS"
#: Seconds after the hook starts before the first progress (one that ends sooner sends none).
GRACE = 0.5
#: Seconds the last progress (output since the previous one) may take before the result goes.
LAST_SEND_WAIT = 2.0
#: Seconds before the first retry of a report the control plane did not take (doubling, up to
#: HEARTBEAT), at least: a test's INTERVAL of 0 must not retry in a busy loop.
RETRY_FLOOR = 0.5

Send = Callable[[dict[str, Any]], Awaitable[bool]]


class Progress:
    """The output tail of one running hook and the task that reports it."""

    def __init__(
        self,
        send: Send,
        *,
        interval: float = INTERVAL,
        heartbeat: float = HEARTBEAT,
        tail_bytes: int = TAIL_BYTES,
        grace: float = GRACE,
    ) -> None:
        self._send = send
        self.grace = grace
        self.interval = interval
        self.heartbeat = heartbeat
        self.tail_bytes = tail_bytes
        self.tail = bytearray()
        self.total = 0
        self.seq = 0
        self.sent = 0
        self._sent_bytes = 0
        self.started = time.monotonic()
        self.retry: dict[str, Any] | None = None
        self._changed = asyncio.Event()

    def feed(self, chunk: bytes) -> None:
        """Add output the hook wrote; keeps only the last ``tail_bytes``."""
        if not chunk:
            return
        self.total += len(chunk)
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_bytes:
            del self.tail[: len(self.tail) - self.tail_bytes]
        self._changed.set()

    def note(self, retry: dict[str, Any] | None) -> None:
        """The retry pending or running (agent/attempts.py), reported with the next progress."""
        self.retry = retry
        self._changed.set()

    def payload(self) -> dict[str, Any]:
        """What the next progress signal says: the tail, the byte count and the time running."""
        self.seq += 1
        tail = bytes(self.tail[-self.tail_bytes :]).decode("utf-8", "ignore")
        found = {
            "status": STATUS,
            "seq": self.seq,
            "output_tail": tail,
            "output_bytes": self.total,
            "elapsed": round(time.monotonic() - self.started, 1),
        }
        if self.retry is not None:
            found["retry"] = dict(self.retry)
        return found

    async def run(self) -> None:
        """Send progress until cancelled: on new output (rate-bounded) or on the heartbeat.

        A report not taken is tried again after the interval, then twice as long each time
        up to the heartbeat, even when the hook writes nothing more: a silent hook's only
        output is not left unseen for a whole heartbeat because one send failed.
        """
        await asyncio.sleep(self.grace)
        failures = 0
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.heartbeat):
                    await self._changed.wait()
            self._changed.clear()
            if await self._send_now():
                await asyncio.sleep(self.interval)
                failures = 0
                continue
            failures += 1
            await asyncio.sleep(min(self.heartbeat, max(self.interval, RETRY_FLOOR) * 2 ** (failures - 1)))
            self._changed.set()

    async def _send_now(self) -> bool:
        """Send a report of the output so far; True when it was taken."""
        size = self.total
        try:
            taken = await self._send(self.payload())
        except Exception as e:  # progress is best effort: never stop the hook for it
            log.warning("progress signal not sent: %s", e)
            return False
        if taken:
            self.sent += 1
            self._sent_bytes = size
        return taken

    async def __aenter__(self) -> Progress:
        self._task = asyncio.create_task(self.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if exc[0] is None and self.seq and self.total > self._sent_bytes:
            # The output since the last report, so a follower sees all of it before the result
            # (with no report tried, the follower shows the result's own output instead).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LAST_SEND_WAIT):
                    await self._send_now()


def progress_body(result_body: bytes, payload: dict[str, Any]) -> bytes:
    """A progress signal built on the body the result would have (same extras and credential).

    It keeps Heat's flat keys for readers that show them, but no ``deploy_status_code``:
    the ``anneal.status`` IN_PROGRESS marks it, and it never completes a deployment.
    """
    body = json.loads(result_body)
    body.pop("deploy_status_code", None)
    body["deploy_stdout"] = payload["output_tail"]
    body["deploy_stderr"] = ""
    body[EXTRA_KEY] = {**(body.get(EXTRA_KEY) or {}), **payload}
    return json.dumps(body, separators=(",", ":")).encode()
