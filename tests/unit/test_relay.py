"""The relay against a real upstream aiohttp server on loopback: bytes unchanged, store and forward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from agent.relay import Relay

DOC = b'{"anneal":{"serial":7},"deployments":[]}'


def upstream_app(seen: list[tuple[str, bytes, dict[str, str]]], answer: dict[str, int]) -> web.Application:
    async def document(request: web.Request) -> web.Response:
        seen.append((request.path_qs, b"", dict(request.headers)))
        if request.headers.get("If-None-Match") == '"7"':
            return web.Response(status=304, headers={"ETag": '"7"'})
        return web.Response(body=DOC, content_type="application/json", headers={"ETag": '"7"'})

    async def signal(request: web.Request) -> web.Response:
        seen.append((request.path_qs, await request.read(), dict(request.headers)))
        return web.json_response({"ok": True}, status=answer["status"])

    app = web.Application()
    app.router.add_get("/v1/agent/document", document)
    app.router.add_post("/v1/signal/{d}/{g}", signal)
    return app


async def test_relay_carries_bytes_and_spools_signals_while_upstream_is_down(
    aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path
) -> None:
    """The relay forwards bytes unchanged, spools signals while upstream is down, delivers them in order."""
    seen: list[tuple[str, bytes, dict[str, str]]] = []
    answer = {"status": 200}
    upstream = await aiohttp_server(upstream_app(seen, answer))
    relay = Relay(str(upstream.make_url("/")), tmp_path / "relay", forward_timeout=5)
    client = await aiohttp_client(relay.app())
    auth = {"Authorization": "Bearer cred-1"}

    # Documents: forwarded with the credential, bytes unchanged, kept.
    resp = await client.get("/v1/agent/document?wait=0", headers=auth)
    assert 200 == resp.status and DOC == await resp.read() and '"7"' == resp.headers["ETag"]
    assert "Bearer cred-1" == seen[-1][2]["Authorization"]
    resp = await client.get("/v1/agent/document", headers={**auth, "If-None-Match": '"7"'})
    assert 304 == resp.status

    # A signal while upstream answers: forwarded at once, exactly these bytes, query kept.
    body = b'{"deploy_status_code":0,"anneal":{"nonce":"n1"}}'
    resp = await client.post("/v1/signal/d1/1?sig=abc", data=body, headers=auth)
    assert 200 == resp.status
    assert ("/v1/signal/d1/1?sig=abc", body) == seen[-1][:2]

    # Upstream goes away: the kept document is served, signals are spooled (202) in order.
    port = upstream.port
    await upstream.close()
    resp = await client.get("/v1/agent/document", headers=auth)
    assert 200 == resp.status and DOC == await resp.read()
    other = {"Authorization": "Bearer unknown"}
    assert 503 == (await client.get("/v1/agent/document", headers=other)).status
    bodies = [b'{"deploy_status_code":0,"n":%d}' % i for i in range(3)]
    for i, b in enumerate(bodies):
        resp = await client.post(f"/v1/signal/d2/{i + 1}", data=b, headers=auth)
        assert 202 == resp.status
    assert 3 == len(list((tmp_path / "relay" / "spool").iterdir()))
    assert await relay.flush() is False  # still down: nothing lost
    assert 3 == len(list((tmp_path / "relay" / "spool").iterdir()))

    # Upstream back (same port): delivered in order, bytes unchanged, spool empty.
    seen.clear()
    upstream = await aiohttp_server(upstream_app(seen, answer), port=port)
    assert await relay.flush() is True
    assert [(f"/v1/signal/d2/{i + 1}", b) for i, b in enumerate(bodies)] == [s[:2] for s in seen]
    assert all("Bearer cred-1" == s[2]["Authorization"] for s in seen)
    assert [] == list((tmp_path / "relay" / "spool").iterdir())

    # A definitive refusal is kept in refused/ with the reason, never dropped.
    await upstream.close()
    resp = await client.post("/v1/signal/d3/1", data=b"{}", headers=auth)
    assert 202 == resp.status
    upstream = await aiohttp_server(upstream_app(seen, {"status": 409}), port=port)
    assert await relay.flush() is True
    refused = list((tmp_path / "relay" / "refused").iterdir())
    assert 1 == len(refused)
    assert json.loads(refused[0].read_bytes())["refused"].startswith("409")
    status = await (await client.get("/relay/status")).json()
    assert 3 == status["delivered"] and 1 == status["refused"] and 0 == status["spooled_now"]
