"""The agent's heartbeats and its version, against a real aiohttp server on loopback."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from typing import Any

import pytest
from aiohttp import web

from agent import cli
from agent.client import Heartbeat
from agent.httpclient import Session


async def test_heartbeat_trouble_is_logged_once_per_change_not_every_beat(
    aiohttp_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Three refused beats log one warning, the return one line, an unreachable control plane one more."""
    answer = {"status": 503}

    async def beat(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "draining"}}, status=answer["status"])

    app = web.Application()
    app.router.add_post("/v1/agent/heartbeat", beat)
    server = await aiohttp_server(app)
    url = str(server.make_url("/v1/agent/heartbeat"))
    heartbeat = Heartbeat("cred-1")
    caplog.set_level(logging.INFO, logger="agent.client")
    async with Session() as http:
        for status in (503, 503, 503, 200, 200):
            answer["status"] = status
            await heartbeat.send(http, url, {"running": None})
        await server.close()
        for _ in range(3):
            await heartbeat.send(http, url, {"running": None})

    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "agent.client"]
    assert [logging.WARNING, logging.INFO, logging.WARNING] == [level for level, _ in lines]
    assert "answered 503: draining" in lines[0][1]
    assert "accepted again" in lines[1][1]
    assert "failed" in lines[2][1]


async def test_an_unchanged_heartbeat_is_left_out_while_polls_say_the_agent_is_alive(
    aiohttp_server: Any,
) -> None:
    """Polling the control plane, only changed, forced, re-asserted or after-failure beats are sent."""
    got: list[dict[str, Any]] = []
    answer = {"status": 200}

    async def beat(request: web.Request) -> web.Response:
        got.append(await request.json())
        return web.json_response({}, status=answer["status"])

    app = web.Application()
    app.router.add_post("/v1/agent/heartbeat", beat)
    server = await aiohttp_server(app)
    url = str(server.make_url("/v1/agent/heartbeat"))
    heartbeat = Heartbeat("cred-1")
    idle = {"serial": 3, "addresses_changed": False}
    plan: list[tuple[dict[str, Any], bool, bool]] = [
        (idle, True, False),  # the first: sent
        (idle, True, False),  # unchanged: left out
        ({**idle, "serial": 4}, True, False),  # changed: sent
        ({**idle, "serial": 4}, True, True),  # forced (a rejection to report): sent
        ({**idle, "serial": 4, "addresses_changed": True}, True, False),  # re-asserted: sent
        ({**idle, "serial": 4}, False, False),  # polls elsewhere (a store): sent
    ]
    async with Session() as http:
        for payload, alive, forced in plan:
            if heartbeat.due(payload, polls_say_alive=alive, forced=forced):
                await heartbeat.send(http, url, payload)
        answer["status"] = 503
        await heartbeat.send(http, url, {**idle, "serial": 5})
        answer["status"] = 200
        assert heartbeat.due({**idle, "serial": 5}, polls_say_alive=True)  # the refused one again

    assert [3, 4, 4, 4, 4, 5] == [p["serial"] for p in got]
    assert (6, 1) == (heartbeat.sent, heartbeat.skipped)


async def test_a_request_ending_after_its_session_closed_keeps_no_connection(aiohttp_server: Any) -> None:
    """The session closes while a request waits for its answer: the answer still arrives, and its
    connection is closed, not put back in the pool of a closed session (left for the garbage
    collector: an unclosed-transport ResourceWarning)."""
    answering = asyncio.Event()
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        answering.set()
        await release.wait()
        return web.Response(text="late")

    app = web.Application()
    app.router.add_get("/slow", slow)
    server = await aiohttp_server(app)
    http = Session()
    request = asyncio.create_task(http.request("GET", str(server.make_url("/slow")), timeout=30, cap=100))
    async with asyncio.timeout(30):
        await answering.wait()
    http.close()
    release.set()
    assert b"late" == (await request).body
    assert {} == {origin: conns for origin, conns in http._idle.items() if conns}


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`anneal-agent --version` prints the version the package was installed with (pyproject.toml)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert 0 == exit_.value.code
    assert f"anneal-agent {importlib.metadata.version('anneal')}\n" == capsys.readouterr().out
