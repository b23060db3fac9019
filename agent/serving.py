"""Serving an aiohttp application within the process's descriptor limit (the control plane, the relay).

* The soft RLIMIT_NOFILE is raised to the hard one at start, and a warning names what
  ``--max-agents`` needs when the limit is below it (two descriptors per agent, plus RESERVE).
* At most ``limit - RESERVE`` connections stay open: past that, the oldest idle ones (waiting
  for a request, as aiohttp's own keep-alive timer sees them) are closed to make room, so
  health checks and requests in progress, long-polls included, go on being served when idle
  connections would take every descriptor. When none is idle, a new connection gets a 503.
* accept() failing for lack of descriptors is one warning line, not a traceback per attempt.
* Idle connections (kept alive, or never sending a request) close after *idle_timeout*; a
  body left unread after its answer is never drained (aiohttp would read and drop it for 10 s,
  holding its buffers): the connection is closed instead.

aiohttp's ``run_app`` takes no protocol factory, so ``run`` starts the runner itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import signal
from asyncio import selector_events
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

log = logging.getLogger(__name__)
#: Descriptors kept free of connections: one accept burst (BACKLOG), the database, logs, pipes.
RESERVE = 256
BACKLOG = 128
#: Seconds a connection stays open after a refusal sent before its body was read: the answer is
#: followed by the end of the write side, reading stops, then it is closed (control/api/middleware.py).
LINGER = 1.0
#: Bytes read from a connection per turn of the event loop (asyncio's default is 256 KiB).
READ_SIZE = 64 * 1024
#: Connections closed at once when over the cap, so the scan is not repeated for every accept.
SHED_BATCH = 16
#: Seconds between the lines saying how many connections were closed or refused.
REPORT = 10.0
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)
_BUSY_BODY = (
    b'{"error": {"code": "unavailable", "message": "every connection is busy (descriptor limit); '
    b'retry later", "where": "connections"}}'
)


@dataclass(frozen=True)
class Limits:
    """How one server process bounds its connections."""

    #: Agents this process is meant to serve (two descriptors each).
    max_agents: int = 1000
    #: Seconds before an idle connection (kept alive, or silent since it opened) is closed.
    idle_timeout: float = 15.0


def fds_needed(agents: int) -> int:
    """Descriptors *agents* agents need: a long-poll and a signal or heartbeat each, plus RESERVE."""
    return 2 * agents + RESERVE


def raise_fd_limit() -> int:
    """Raise the soft descriptor limit to the hard one (as systemd advises); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def check_fd_limit(agents: int, what: str) -> bool:
    """Warn when the descriptor limit is below what *agents* agents need; False then."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    needed = fds_needed(agents)
    if limit == resource.RLIM_INFINITY or limit >= needed:
        return True
    log.warning(
        "the descriptor limit (RLIMIT_NOFILE %d) is below the %d that %s needs (%d agents: 2 each + %d); "
        "past %d connections idle ones are closed and new ones refused: raise LimitNOFILE in the "
        "systemd unit or `ulimit -n`",
        limit,
        needed,
        what,
        agents,
        RESERVE,
        connection_cap(limit),
    )
    return False


def connection_cap(limit: int) -> int:
    """Connections kept open at most under a descriptor limit of *limit*."""
    return max(limit - RESERVE, limit // 2)


class ConnectionGuard:
    """The protocol factory of the listening socket: keeps connections under the cap."""

    def __init__(self, server: web.Server, cap: int) -> None:
        self.server = server
        self.cap = cap
        #: Connections closed to make room, and refused, since the start (reported every REPORT s).
        self.shed = self.refused = 0
        self._reported = (0, 0)
        self._next_report = 0.0
        self._no_idle_until = 0.0

    def __call__(self) -> asyncio.BaseProtocol:
        # aiohttp keeps its connections in accept order: the oldest come first.
        open_now = len(self.server._connections)
        room = open_now < self.cap or self._make_room() or open_now < self.cap + RESERVE // 2
        self._report(open_now)
        if not room:
            self.refused += 1
            return _Refuse()
        return self.server()

    def _make_room(self) -> bool:
        """Get under the cap: count the connections closing, close the oldest idle ones; False if short."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._no_idle_until:
            return False
        # SHED_BATCH more than needed: the next accepts find room without a scan of their own.
        to_free = len(self.server._connections) - self.cap + SHED_BATCH
        for handler in self.server._connections:  # closing one only schedules its removal
            if to_free <= 0:
                break
            if handler.transport is None:  # closing already: its descriptor is on its way back
                to_free -= 1
            elif _idle(handler):
                handler.force_close()
                self.shed += 1
                to_free -= 1
        if to_free >= SHED_BATCH:  # not even one freed: do not scan them all again for every accept
            self._no_idle_until = loop.time() + 1.0
        return to_free < SHED_BATCH

    def _report(self, open_now: int) -> None:
        """One line every REPORT seconds while connections are closed or refused, with the counts."""
        now = asyncio.get_running_loop().time()
        if now < self._next_report or (self.shed, self.refused) == self._reported:
            return
        shed, refused = self.shed - self._reported[0], self.refused - self._reported[1]
        log.warning(
            "%d connections open, cap %d (descriptor limit): closed %d idle and refused %d since the last report",
            open_now,
            self.cap,
            shed,
            refused,
        )
        self._reported = (self.shed, self.refused)
        self._next_report = now + REPORT

    def loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """accept() out of descriptors: one line, no traceback (asyncio retries it after 1 s)."""
        exc = context.get("exception")
        if (
            isinstance(exc, OSError)
            and exc.errno in _OUT_OF_DESCRIPTORS
            and "accept" in context.get("message", "")
        ):
            log.warning(
                "accept() failed: %s (%d connections open, cap %d); retrying",
                exc.strerror,
                len(self.server._connections),
                self.cap,
            )
            return
        loop.default_exception_handler(context)


def _idle(handler: Any) -> bool:
    """Waiting for its next request: the state aiohttp's keep-alive timer closes."""
    waiter = getattr(handler, "_waiter", None)
    return waiter is not None and not waiter.done()


class _Refuse(asyncio.Protocol):
    """Answers 503 and closes: every open connection is busy and the descriptors are spoken for."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY % (len(_BUSY_BODY), _BUSY_BODY))
        transport.close()


class QuietBadRequests(logging.Filter):
    """A malformed HTTP request (a bad header, a bad request line) is one warning line, no traceback.

    aiohttp logs each at ERROR with its traceback: anyone who can connect could fill the log.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            first = (exc.message or type(exc).__name__).strip().splitlines()[0].replace("%", "%%")
            record.msg = f"malformed HTTP request from %s: {exc.code} {first}"
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


def run(
    app: web.Application,
    host: str,
    port: int,
    limits: Limits,
    what: str,
    ready: Callable[[], None] | None = None,
    **runner_args: Any,
) -> None:
    """Serve *app* on host:port until SIGTERM or SIGINT, within the descriptor limit; *ready* once it listens."""
    # asyncio reads up to 256 KiB per socket per turn of the loop, before any handler can refuse
    # the request: 200 uploads refused at their headers still held 50 MB. READ_SIZE bounds that.
    transport_class = getattr(selector_events, "_SelectorSocketTransport", None)  # absent elsewhere: no cap
    if transport_class is not None:
        transport_class.max_size = READ_SIZE
    raise_fd_limit()
    check_fd_limit(limits.max_agents, what)
    logging.getLogger("aiohttp.server").addFilter(QuietBadRequests())
    asyncio.run(_serve(app, host, port, limits, ready, runner_args))


async def _serve(
    app: web.Application,
    host: str,
    port: int,
    limits: Limits,
    ready: Callable[[], None] | None,
    runner_args: dict[str, Any],
) -> None:
    loop = asyncio.get_running_loop()
    runner = web.AppRunner(app, keepalive_timeout=limits.idle_timeout, lingering_time=0, **runner_args)
    await runner.setup()
    assert runner.server is not None
    guard = ConnectionGuard(runner.server, connection_cap(resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    loop.set_exception_handler(guard.loop_exception)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        listener = await loop.create_server(guard, host, port, backlog=BACKLOG, reuse_address=True)
    except BaseException:
        await runner.cleanup()
        raise
    if ready is not None:
        ready()
    try:
        await stop.wait()
    finally:
        listener.close()
        await runner.cleanup()
