"""A loopback TCP front for several control-plane processes (what a load balancer does).

Each connection goes to the backends in turn, skipping those that refuse the
connection, so agents and the CLI see one URL while processes die and restart.
Runs its own asyncio loop in a thread; stop() closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading


class Front:
    def __init__(self, backends: list[int]) -> None:
        self.backends = list(backends)
        self.port = 0
        self._rr = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._live: set[asyncio.StreamWriter] = set()
        #: While set, connections are accepted and never answered (see blackhole()).
        self.blackholed = False
        self._stopping = False
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise AssertionError("front proxy did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()
        # stop() closed every connection: let the handlers see it and end (a connection accepted
        # just then is closed by its handler), cancel what is left after 5 s, then close the loop.
        pending = asyncio.all_tasks(self._loop)
        ended = asyncio.wait(pending, timeout=5) if pending else asyncio.sleep(0)
        self._loop.run_until_complete(ended)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            return
        if self.blackholed:  # accepted, then never answered: the client waits for its own timeout
            self._live.add(writer)
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while await reader.read(65536):
                    pass
            self._live.discard(writer)
            return
        start = next(self._rr)
        upstream = None
        for i in range(len(self.backends)):
            port = self.backends[(start + i) % len(self.backends)]
            try:
                # Not wait_for: on Python 3.11 a connection made just as its timeout fires is lost
                # unclosed (a ResourceWarning in the test); a timeout scope cancels only a pending connect.
                async with asyncio.timeout(2):
                    upstream = await asyncio.open_connection("127.0.0.1", port)
                break
            except (OSError, TimeoutError):
                continue
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        self._live.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError):
                dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:  # also when cancelled before the pipes ran (a stop, or a connect timeout's late cancel)
            up_writer.close()
            self._live.difference_update((writer, up_writer))

    def blackhole(self, on: bool) -> None:
        """Start or end a blackhole: open connections are cut, new ones hang unanswered until it ends."""
        self.route(self.backends, blackholed=on)

    def route(self, backends: list[int], *, blackholed: bool = False) -> None:
        """Send new connections to *backends* and close every open one (pooled keep-alives too)."""
        done = threading.Event()

        def swap() -> None:
            self.blackholed = blackholed
            self.backends = list(backends)
            for w in list(self._live):
                w.close()
            self._live.clear()
            done.set()

        self._loop.call_soon_threadsafe(swap)
        if not done.wait(10):
            raise AssertionError("front proxy did not switch its backends")

    def stop(self) -> None:
        def close() -> None:
            self._stopping = True
            if self._server is not None:
                self._server.close()
            for w in list(self._live):
                w.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(close)
        self._thread.join(10)
