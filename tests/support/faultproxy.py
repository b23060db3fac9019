"""An HTTP fault proxy for signals: duplicates, reorders, delays, and replays old generations.

A real aiohttp server on a free loopback port in front of a control plane. Every
request is forwarded with its method, path, query, body and Authorization header;
signal POSTs (``/v1/signal/<deployment>/<generation>``) are also, by a seeded coin:

* duplicated (the same bytes sent again within 0.5 s: before, with or after the original),
* reordered (held a short random while, so later signals overtake it),
* delayed (held ``delay`` seconds, the agent waiting meanwhile),
* followed by a replay of a signal of the previous generation, captured earlier,
  sent again to its own (old) URL (for exactly ``replay`` of the newer signals).

The agent sees the answer to its own copy. Every copy sent upstream is recorded in
``sent`` with its kind and the control plane's answer, for the test to count.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

SIGNAL_PATH = re.compile(r"^/v1/signal/([^/]+)/(\d+)$")


@dataclass(frozen=True)
class Rates:
    duplicate: float = 0.30
    reorder: float = 0.10
    replay: float = 0.05
    delay: float = 0.02
    #: Seconds a delayed signal is held.
    delay_seconds: float = 5.0


@dataclass(frozen=True)
class Sent:
    kind: str  # original, duplicate, replay
    deployment_id: str
    generation: int
    status: int
    duplicate: bool | None


@dataclass(frozen=True)
class Captured:
    path_qs: str
    headers: dict[str, str]
    body: bytes
    deployment_id: str
    generation: int


@dataclass
class FaultProxy:
    upstream: str
    rates: Rates = field(default_factory=Rates)
    seed: int = 7
    sent: list[Sent] = field(default_factory=list)
    held: dict[str, int] = field(default_factory=lambda: {"reordered": 0, "delayed": 0})
    _captured: dict[int, list[Captured]] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _newer: int = 0
    _originals: int = 0
    _replays: int = 0

    async def start(self, port: int) -> str:
        self._rng = random.Random(self.seed)
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200))
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        await self.drain()
        await self._runner.cleanup()
        await self._http.close()

    async def drain(self) -> None:
        """Wait for duplicates and replays still on their way."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _forward(
        self, path_qs: str, method: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, bytes]:
        async with self._http.request(
            method,
            self.upstream + path_qs,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=300),
        ) as resp:
            return resp.status, await resp.read()

    async def _send(self, kind: str, cap: Captured) -> tuple[int, bytes]:
        status, raw = await self._forward(cap.path_qs, "POST", cap.headers, cap.body)
        duplicate = None
        if 200 <= status < 300:
            duplicate = bool(json.loads(raw).get("duplicate"))
        self.sent.append(Sent(kind, cap.deployment_id, cap.generation, status, duplicate))
        return status, raw

    def _later(self, delay: float, kind: str, cap: Captured) -> None:
        async def go() -> None:
            await asyncio.sleep(delay)
            await self._send(kind, cap)

        task = asyncio.create_task(go())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {
            k: v
            for k, v in request.headers.items()
            if k in ("Authorization", "Content-Type", "If-None-Match")
        }
        match = SIGNAL_PATH.match(request.path)
        if request.method != "POST" or match is None:
            status, raw = await self._forward(request.path_qs, request.method, headers, body)
            return web.Response(status=status, body=raw, content_type="application/json")
        cap = Captured(request.path_qs, headers, body, match.group(1), int(match.group(2)))
        rng, rates = self._rng, self.rates
        if rng.random() < rates.reorder:
            self.held["reordered"] += 1
            await asyncio.sleep(rng.uniform(0.2, 2.0))
        self._originals += 1
        if self.held["delayed"] < rates.delay * self._originals:  # exactly the rate, as replays
            self.held["delayed"] += 1
            await asyncio.sleep(rates.delay_seconds)
        if rng.random() < rates.duplicate:  # may overtake the original, or race it
            self._later(rng.uniform(0.0, 0.5), "duplicate", cap)
        status, raw = await self._send("original", cap)
        if 200 <= status < 300:
            self._captured.setdefault(cap.generation, []).append(cap)
        older = self._captured.get(cap.generation - 1)
        if older:  # exactly the rate of replays (not a coin): a small run still has some
            self._newer += 1
            if self._replays < rates.replay * self._newer:
                self._replays += 1
                self._later(rng.uniform(0.0, 1.0), "replay", rng.choice(older))
        return web.Response(status=status, body=raw, content_type="application/json")

    def counts(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for s in self.sent:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        return {**kinds, **self.held}
