"""Bodies longer than one network read arrive whole: documents, store listings, relayed signals.

`aiohttp.StreamReader.read(n)` returns what is buffered (about 128 KiB here), not n bytes;
the agent, the relay and the Swift store read capped bodies with one such call, which cut
every document over that size (the agent then refused it as not canonical) and broke Swift
listings of 1,000 signals. These tests serve real bodies of 1 MiB over loopback.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from aiohttp import web

from agent import client, wire_caps
from agent.httpclient import Session
from agent.relay import Relay
from agent.transports import tempurl
from tests.support.controlplane import ControlPlane
from tests.support.templates import one_script_deployment

BIG = bytes(range(256)) * 4096  # 1 MiB, under the 4 MiB document cap


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def test_documents_and_relayed_signals_longer_than_one_read_arrive_whole(tmp_path: Path) -> None:
    """A 1 MiB document (direct, relayed, from a store URL) and a large relayed signal arrive whole."""
    received: list[bytes] = []

    async def document(request: web.Request) -> web.Response:
        return web.Response(body=BIG, headers={"ETag": '"1"'}, content_type="application/json")

    async def signal(request: web.Request) -> web.Response:
        received.append(await request.read())
        return web.json_response({"status": "COMPLETE"})

    async def main() -> None:
        upstream = web.Application(client_max_size=8 * 1024 * 1024)
        upstream.router.add_get("/v1/agent/document", document)
        upstream.router.add_post("/v1/signal/{rest:.*}", signal)
        up_runner, up_url = await serve(upstream)
        relay_runner, relay_url = await serve(Relay(up_url, tmp_path / "relay").app())
        try:
            async with Session() as http:
                direct = await client.fetch_document(http, f"{up_url}/v1/agent/document", "c", "", 0)
                relayed = await client.fetch_document(http, f"{relay_url}/v1/agent/document", "c", "", 0)
                store = await tempurl.fetch(http, {"document_url": f"{up_url}/v1/agent/document"}, "", 0)
                signal_body = BIG[: wire_caps.MAX_SIGNAL_BYTES - 1]
                status, _ = await client.send(http, "POST", f"{relay_url}/v1/signal/d/1", signal_body, {})
            assert [BIG] * 3 == [direct.body, relayed.body, store.body]
            assert 200 == status
            assert [hashlib.sha256(signal_body).hexdigest()] == [
                hashlib.sha256(b).hexdigest() for b in received
            ]
        finally:
            await relay_runner.cleanup()
            await up_runner.cleanup()

    asyncio.run(main())


def test_an_agent_runs_a_document_of_several_hundred_kilobytes(control_plane: ControlPlane) -> None:
    """A real agent takes a 300 KB document over HTTP and runs it (it refused it before)."""
    filler = "\n".join(f"# {i:06d} " + "x" * 90 for i in range(3000))  # ~300 KB of comments
    script = "#!/bin/sh\n" + filler + "\nprintf 'big and whole' > \"$heat_outputs_path.said\"\n"
    template = one_script_deployment(script, outputs=["said"])
    assert 201 == control_plane.create("big", template).status
    assert "CREATE_COMPLETE" == control_plane.wait_stack("big", timeout=180)["status"]
    assert {"said": "big and whole"} == control_plane.outputs("big")
