"""A simulated agent: polls its document like the real one and notes when each generation arrives."""

from __future__ import annotations

import asyncio
import json
import random
import time

import aiohttp

from bench.harness import Server

#: Whole-request deadline on top of the long-poll wait, as the real agent has (seconds).
REQUEST_SLACK = 15.0


class SimAgent:
    """Long-polls (``wait`` > 0) or polls every ``interval`` seconds; runs nothing."""

    def __init__(self, server: Server, document_url: str) -> None:
        self.server = server
        self.url = document_url
        self.etag = ""
        #: (deployment id, generation) -> time.time() when a document carrying it arrived.
        self.seen: dict[tuple[str, int], float] = {}
        self.highest_generation = 0
        self.polls = 0
        #: Size of the newest document received.
        self.document_bytes = 0
        self.errors = 0

    async def poll(self, http: aiohttp.ClientSession, wait: float) -> None:
        headers = {"Authorization": f"Bearer {self.server.credential}"}
        if self.etag:
            headers["If-None-Match"] = self.etag
        params = {"wait": f"{wait:g}"} if wait > 0 else None
        timeout = aiohttp.ClientTimeout(total=wait + REQUEST_SLACK)
        async with http.get(self.url, params=params, headers=headers, timeout=timeout) as resp:
            body = await resp.read()
            now = time.time()  # "hook start" of a simulated agent: the document is in hand
            self.polls += 1
            if resp.status == 304:
                return
            if resp.status != 200:
                raise RuntimeError(f"{resp.status} {body[:200]!r}")
            self.etag = resp.headers.get("ETag", "")
            self.document_bytes = len(body)
        for meta in json.loads(body)["anneal"]["deployments"].values():
            key = (str(meta["deployment_id"]), int(meta["generation"]))
            self.seen.setdefault(key, now)
            self.highest_generation = max(self.highest_generation, key[1])

    async def run(self, http: aiohttp.ClientSession, wait: float, interval: float, until: float) -> None:
        """Poll until cancelled or *until* (monotonic): at once after a long-poll, or every *interval* s."""
        if interval > 0:
            await asyncio.sleep(random.uniform(0, interval))  # agents are not in lock-step
        while time.monotonic() < until:
            try:
                await self.poll(http, wait)
            except (aiohttp.ClientError, TimeoutError, RuntimeError):
                self.errors += 1
                await asyncio.sleep(1)
                continue
            if interval > 0:
                await asyncio.sleep(interval)


class Fleet:
    """Many simulated agents in this one process, sharing one connection pool."""

    def __init__(self, servers: list[Server], document_url: str) -> None:
        self.agents = [SimAgent(s, document_url) for s in servers]
        self._tasks: list[asyncio.Task[None]] = []
        self._http: aiohttp.ClientSession | None = None

    async def start(self, wait: float, interval: float = 0.0, lifetime: float = 600) -> None:
        """Fetch every document once, then keep polling in the background (for *lifetime* s at most)."""
        connector = aiohttp.TCPConnector(limit=len(self.agents) + 10)
        self._http = aiohttp.ClientSession(connector=connector)
        await asyncio.gather(*(a.poll(self._http, 0) for a in self.agents))
        until = time.monotonic() + lifetime
        self._tasks = [asyncio.create_task(a.run(self._http, wait, interval, until)) for a in self.agents]
        await asyncio.sleep(0.5)  # let the long-polls reach the control plane and park

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def wait_generation(self, generation: int, timeout: float) -> bool:
        """True once every agent holds a document with *generation* (bounded by *timeout*)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(a.highest_generation >= generation for a in self.agents):
                return True
            await asyncio.sleep(0.02)
        return False
