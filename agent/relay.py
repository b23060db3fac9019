"""`anneal-agent relay`: store and forward between an isolated network and the control plane.

Runs on a host that sees both networks. Agents enrol and poll through it (their
``--url`` is the relay's); the relay forwards every request upstream with its bytes
and headers unchanged, so the document signature and the signal checks hold end to
end: the relay is trusted with nothing.

* Documents: each answer upstream gave is kept (per agent credential, on disk); while
  upstream is unreachable the relay serves the last one it saw (the agent still checks
  its signature, serial and expiry).
* Signals: forwarded at once when upstream answers; otherwise written to the spool
  directory (temp file, fsync, rename) and answered ``202``; a background task
  delivers spooled signals in order until upstream answers, then deletes them
  (refusals are moved to ``refused/`` with the reason, never dropped silently).
* Heartbeats and enrolment are forwarded; without upstream they get ``503``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import os
import random
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from agent import serving, wire_caps
from agent.client import read_capped
from agent.fsutil import private_dir, write_atomic

log = logging.getLogger(__name__)
#: Upstream answers after which a spooled signal is done (delivered, or refused for good).
FINAL = frozenset({400, 401, 403, 404, 409, 410, 413})
HOP_HEADERS = ("Authorization", "Content-Type", "If-None-Match")
#: Added to every forwarded request (RFC 9110 section 7.6.3): the control plane's access log shows it.
VIA = "1.1 anneal-relay"
BACKOFF_CAP = 30.0
#: Seconds an agent's request body may take to arrive (as the control plane's --body-timeout).
BODY_TIMEOUT = 30.0


class Relay:
    def __init__(self, upstream: str, state_dir: Path, forward_timeout: float = 10.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.state_dir = state_dir
        self.spool = state_dir / "spool"
        self.refused = state_dir / "refused"
        self.documents = state_dir / "documents"
        for d in (state_dir, self.spool, self.refused, self.documents):
            private_dir(d)
        self.forward_timeout = forward_timeout
        self._wake = asyncio.Event()
        self._http: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self.counts = {"forwarded": 0, "spooled": 0, "delivered": 0, "refused": 0, "served_cached": 0}

    # ---------------------------------------------------------------- app

    def app(self) -> web.Application:
        app = web.Application(client_max_size=wire_caps.MAX_DOCUMENT_BYTES + 64 * 1024)
        app.router.add_get("/v1/agent/document", self.document)
        app.router.add_post("/v1/agent/enrol", self.passthrough)
        app.router.add_post("/v1/agent/heartbeat", self.passthrough)
        app.router.add_route("*", "/v1/signal/{rest:.*}", self.signal)
        app.router.add_get("/relay/status", self.status)
        app.cleanup_ctx.append(self._lifetime)
        return app

    async def _lifetime(self, app: web.Application) -> Any:
        self._http = aiohttp.ClientSession()
        self._task = asyncio.create_task(self._deliver_loop())
        yield
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._http.close()

    def _headers(self, request: web.Request) -> dict[str, str]:
        return {h: request.headers[h] for h in HOP_HEADERS if h in request.headers}

    async def _forward(
        self, method: str, path_qs: str, headers: dict[str, str], body: bytes, timeout: float
    ) -> tuple[int, bytes, dict[str, str]]:
        assert self._http is not None
        async with self._http.request(
            method,
            self.upstream + path_qs,
            data=body or None,
            headers={**headers, "Via": VIA},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp:
            data = await read_capped(resp.content, wire_caps.MAX_DOCUMENT_BYTES)
            keep = {h: resp.headers[h] for h in ("Content-Type", "ETag") if h in resp.headers}
            return resp.status, data, keep

    # ---------------------------------------------------------------- routes

    async def passthrough(self, request: web.Request) -> web.Response:
        try:
            async with asyncio.timeout(BODY_TIMEOUT):
                body = await read_capped(request.content, wire_caps.MAX_SIGNAL_BYTES)
        except TimeoutError:
            return _error(408, f"relay: body not received within {BODY_TIMEOUT:g} s")
        if len(body) > wire_caps.MAX_SIGNAL_BYTES:
            return _error(413, f"relay: body over {wire_caps.MAX_SIGNAL_BYTES} bytes")
        try:
            status, data, headers = await self._forward(
                request.method, request.path_qs, self._headers(request), body, self.forward_timeout
            )
        except (aiohttp.ClientError, TimeoutError) as e:
            return _error(503, f"relay: upstream {self.upstream} unreachable: {e!r}")
        self.counts["forwarded"] += 1
        return web.Response(status=status, body=data, headers=headers)

    async def document(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if not auth:
            return _error(401, "relay: documents are fetched with the agent's credential")
        cache = self.documents / (hashlib.sha256(auth.encode()).hexdigest() + ".json")
        wait = _seconds(request.query.get("wait", "0"))
        try:
            status, data, headers = await self._forward(
                "GET", request.path_qs, self._headers(request), b"", wait + self.forward_timeout
            )
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("upstream unreachable for a document (%r); serving the last one kept", e)
            return await self._cached(cache, request.headers.get("If-None-Match", ""), wait)
        self.counts["forwarded"] += 1
        if status == 200:
            entry = {"etag": headers.get("ETag", ""), "body": base64.b64encode(data).decode()}
            await asyncio.to_thread(write_atomic, cache, json.dumps(entry).encode())
        elif status >= 500:
            return await self._cached(cache, request.headers.get("If-None-Match", ""), wait)
        return web.Response(status=status, body=data, headers=headers)

    async def _cached(self, cache: Path, etag: str, wait: float) -> web.Response:
        try:
            entry = json.loads(cache.read_bytes())
        except (OSError, ValueError):
            return _error(503, "relay: upstream unreachable and no document kept for this agent")
        if entry["etag"] == etag:
            await asyncio.sleep(min(wait, 5.0))  # the agent re-polls: keep that slow while cut off
            return web.Response(status=304, headers={"ETag": etag})
        self.counts["served_cached"] += 1
        return web.Response(
            body=base64.b64decode(entry["body"]),
            content_type="application/json",
            headers={"ETag": entry["etag"]},
        )

    async def signal(self, request: web.Request) -> web.Response:
        try:
            async with asyncio.timeout(BODY_TIMEOUT):
                body = await read_capped(request.content, wire_caps.MAX_SIGNAL_BYTES)
        except TimeoutError:
            return _error(408, f"relay: signal not received within {BODY_TIMEOUT:g} s")
        if len(body) > wire_caps.MAX_SIGNAL_BYTES:
            return _error(413, f"relay: signal over {wire_caps.MAX_SIGNAL_BYTES} bytes")
        headers = self._headers(request)
        if not self._pending():  # nothing queued before it: try at once, keeping the order
            try:
                status, data, hdrs = await self._forward(
                    request.method, request.path_qs, headers, body, self.forward_timeout
                )
                if status < 500:
                    self.counts["forwarded"] += 1
                    return web.Response(status=status, body=data, headers=hdrs)
            except (aiohttp.ClientError, TimeoutError) as e:
                log.info("upstream unreachable (%r): spooling the signal", e)
        entry = {
            "method": request.method,
            "path_qs": request.path_qs,
            "headers": headers,
            "body": base64.b64encode(body).decode(),
            "attempts": 0,
        }
        name = f"{time.time_ns():020d}-{random.getrandbits(32):08x}.json"
        await asyncio.to_thread(write_atomic, self.spool / name, json.dumps(entry).encode())
        self.counts["spooled"] += 1
        self._wake.set()
        return web.json_response(
            {"queued": True, "relay": "stored; delivered when upstream answers"}, status=202
        )

    async def status(self, request: web.Request) -> web.Response:
        return web.json_response({**self.counts, "spooled_now": len(self._pending())})

    # ---------------------------------------------------------------- forwarding

    def _pending(self) -> list[Path]:
        return sorted(p for p in self.spool.iterdir() if p.suffix == ".json" and not p.name.startswith("."))

    async def _deliver_loop(self) -> None:
        failures = 0
        while True:
            delivered_all = await self.flush()
            if delivered_all:
                failures = 0
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(30.0):
                        await self._wake.wait()
            else:
                failures += 1
                await asyncio.sleep(min(BACKOFF_CAP, 0.5 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0))

    async def flush(self) -> bool:
        """Deliver spooled signals in order; False when upstream did not answer (retry later)."""
        for path in self._pending():
            try:
                entry = json.loads(path.read_bytes())
            except (OSError, ValueError) as e:
                log.error("spooled signal %s unreadable (%s): moved to refused/", path.name, e)
                os.replace(path, self.refused / path.name)
                continue
            try:
                status, data, _ = await self._forward(
                    entry["method"],
                    entry["path_qs"],
                    entry["headers"],
                    base64.b64decode(entry["body"]),
                    self.forward_timeout,
                )
            except (aiohttp.ClientError, TimeoutError) as e:
                log.warning("upstream still unreachable (%r); %d signals spooled", e, len(self._pending()))
                return False
            if 200 <= status < 300:
                path.unlink()
                self.counts["delivered"] += 1
            elif status in FINAL:
                entry["refused"] = f"{status} {data[:300].decode('utf-8', 'replace')}"
                write_atomic(self.refused / path.name, json.dumps(entry).encode())
                path.unlink()
                self.counts["refused"] += 1
                log.error("upstream refused spooled signal %s: %s", path.name, entry["refused"])
            else:
                log.warning("upstream answered %s for a spooled signal; retrying later", status)
                return False
        return True


def _seconds(raw: str) -> float:
    try:
        return max(0.0, min(float(raw), 300.0))
    except ValueError:
        return 0.0


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "where": "relay"}}, status=status)


def serve(listen: str, upstream: str, state_dir: Path, limits: serving.Limits) -> None:
    """Run the relay until SIGTERM, within the descriptor limit (agent/serving.py)."""
    host, _, port = listen.rpartition(":")
    relay = Relay(upstream, state_dir)
    log.info("relay on http://%s:%s for %s, spool in %s", host, port, upstream, relay.spool)
    what = f"--max-agents {limits.max_agents}"
    serving.run(relay.app(), host.strip("[]") or "127.0.0.1", int(port), limits, what, access_log=None)
