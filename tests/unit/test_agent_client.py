"""The agent's heartbeats and its version, against a real aiohttp server on loopback."""

from __future__ import annotations

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


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`anneal-agent --version` prints the version the package was installed with (pyproject.toml)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert 0 == exit_.value.code
    assert f"anneal-agent {importlib.metadata.version('anneal')}\n" == capsys.readouterr().out
