"""A stand-in for heat-engine's side of the agent: it serves one Heat-format document and records signals.

heat-engine cannot run here (it needs Keystone, a message bus and a database of its own), so
a small real aiohttp server serves the document the way a Swift TempURL would and records
every signal request; the agent under test is the real `anneal-agent` in --heat-compat mode.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.processes import BIN

AGENT = str(BIN / "anneal-agent")


class FakeHeat:
    """Serves one document like a Swift object (Last-Modified) and records signal requests."""

    def __init__(self) -> None:
        self.document: dict[str, Any] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.signals: list[tuple[str, str, dict[str, Any], str]] = []
        app = web.Application()
        app.router.add_get("/metadata/doc.json", self.metadata)
        app.router.add_post("/v1/signal/{arn}", self.signal)
        app.router.add_put("/v1/AUTH_3f1c/{container}/{obj}", self.signal)
        self.server = TestServer(app, host="127.0.0.1")

    async def metadata(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path, request.query_string))
        return web.json_response(self.document, headers={"Last-Modified": "Sat, 01 May 2026 10:00:04 GMT"})

    async def signal(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        self.signals.append((request.method, request.path, body, request.headers.get("Content-Type", "")))
        return web.Response(status=201 if request.method == "PUT" else 200)


async def run_agent(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    """Run `anneal-agent *args*` to its end (bounded); its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        AGENT, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()
