"""A simulated agent: polls its document like the real one and notes when each generation arrives."""

from __future__ import annotations

import asyncio
import json
import random
import time

import aiohttp

from agent import verify
from agent.errors import DocumentRejectedError
from bench.harness import Server

#: Whole-request deadline on top of the long-poll wait, as the real agent has (seconds).
REQUEST_SLACK = 15.0


class SimAgent:
    """Long-polls (``wait`` > 0) or polls every ``interval`` seconds; runs nothing.

    With the control plane's key (``Server.control_key``) it accepts a document as the real agent
    does (agent/verify.py's ``signed`` policy: Ed25519 signature, expiry, address, serial floor);
    a refused one counts in ``rejected`` and is not "in hand".
    """

    def __init__(self, server: Server, document_url: str) -> None:
        self.server = server
        self.url = document_url
        self.etag = ""
        self.verifiers: list[verify.Verifier] = []
        self.serial: verify.SerialCheck | None = None
        if server.control_key:
            self.verifiers, self.serial, _ = verify.policy("signed", server.server_id, server.control_key, 0)
        self.rejected = 0
        #: Verify after the round instead of on arrival (``settle``), each document's check time added
        #: to its arrival: the simulator's verification then delays no other agent's arrival on this
        #: one event loop (``received``: highest seen).
        self.defer = False
        self.pending: list[tuple[bytes, float]] = []
        self.received = 0
        #: The newest document received (bench/rollout.py times accepting it again, alone).
        self.last_body = b""
        #: (deployment id, generation) -> time.time() when a document carrying it was in hand (verified).
        self.seen: dict[tuple[str, int], float] = {}
        #: The same, when its bytes were in (before the check): the control plane's part of the figure.
        self.bytes_in: dict[tuple[str, int], float] = {}
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
            now = time.time()  # the bytes are in; in hand once verified (below), or at once if deferred
            self.polls += 1
            if resp.status == 304:
                return
            if resp.status != 200:
                raise RuntimeError(f"{resp.status} {body[:200]!r}")
            self.etag = resp.headers.get("ETag", "")
            self.document_bytes, self.last_body = len(body), body
        if self.defer:  # noted now, verified once the round is in (Fleet.wait_generation)
            self.pending.append((body, now))
            metas = json.loads(body)["anneal"]["deployments"].values()
            self.received = max([self.received, *(int(m["generation"]) for m in metas)])
            return
        self.take(body, now)  # in hand once verified, as the real agent's

    def take(self, body: bytes, bytes_in: float) -> None:
        """Note each generation of *body* as in hand once verified, if accepted.

        Deferred (``defer``), in hand at *bytes_in* plus this check's own time: what an agent on
        its own server takes, without the wait behind the other agents' checks in this process.
        """
        started = time.perf_counter()
        accepted = self.accept(body)
        at = bytes_in + time.perf_counter() - started if self.defer else time.time()
        for dep_id, generation in accepted:
            self.seen.setdefault((dep_id, generation), at)
            self.bytes_in.setdefault((dep_id, generation), bytes_in)
            self.highest_generation = max(self.highest_generation, generation)

    def settle(self) -> None:
        """Verify the documents received and not yet verified (``defer``), each at its arrival time."""
        pending, self.pending = self.pending, []
        for body, bytes_in in pending:
            self.take(body, bytes_in)

    def accept(self, body: bytes) -> list[tuple[str, int]]:
        """(deployment id, generation) of each item of a document the agent accepts; none if refused."""
        if self.serial is None:
            metas = json.loads(body)["anneal"]["deployments"].values()
            return [(str(m["deployment_id"]), int(m["generation"])) for m in metas]
        try:
            doc = verify.decode_and_verify(body, self.verifiers)
        except DocumentRejectedError:
            self.rejected += 1
            return []
        self.serial.highest = doc.serial
        return [(m.deployment_id, m.generation) for m in doc.meta.values()]

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

    def __init__(self, servers: list[Server], document_url: str, *, defer: bool = False) -> None:
        self.agents = [SimAgent(s, document_url) for s in servers]
        for agent in self.agents:
            agent.defer = defer
        self._tasks: list[asyncio.Task[None]] = []
        self._http: aiohttp.ClientSession | None = None

    async def start(self, wait: float, interval: float = 0.0, lifetime: float = 600) -> None:
        """Fetch every document once, then keep polling in the background (for *lifetime* s at most)."""
        connector = aiohttp.TCPConnector(limit=len(self.agents) + 10)
        self._http = aiohttp.ClientSession(connector=connector)
        gate = asyncio.Semaphore(256)  # 5,000 first fetches at once time out on a loaded machine

        async def first(agent: SimAgent) -> None:
            async with gate:
                assert self._http is not None
                await agent.poll(self._http, 0)

        await asyncio.gather(*(first(a) for a in self.agents))
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
            if all(max(a.highest_generation, a.received) >= generation for a in self.agents):
                for a in self.agents:
                    a.settle()
                return all(a.highest_generation >= generation for a in self.agents)
            await asyncio.sleep(0.02)
        return False
