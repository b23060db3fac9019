"""The agent against an untrusted store: rollback, freeze, tampering, key rotation (R12-R15).

The store is a real aiohttp server on loopback that serves whatever bytes the
test puts in it (the python-tuf simulator pattern, over HTTP): it plays the
attacker who can write the bucket. It also records the agent's heartbeats,
which carry its rejection reports. Hooks are real `script` hook subprocesses
that append to a marker file, so "0 hooks run" is read off the disk. The
agent's clock is moved by the test instead of sleeping.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import envelope, wire
from agent.config import AgentConfig
from agent.errors import ConfigError, DocumentRejectedError
from agent.httpclient import Session
from agent.loop import Agent

T0 = 1_900_000_000.0
SERVER = "srv-1"


class Store:
    """The bucket: one document, served with an ETag; heartbeats recorded."""

    def __init__(self) -> None:
        self.body = b""
        self.heartbeats: list[dict[str, Any]] = []
        self.fetches = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/doc", self.document)
        app.router.add_post("/hb", self.heartbeat)
        return app

    async def document(self, request: web.Request) -> web.Response:
        self.fetches += 1
        etag = '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=self.body, content_type="application/json", headers={"ETag": etag})

    async def heartbeat(self, request: web.Request) -> web.Response:
        self.heartbeats.append(await request.json())
        return web.json_response({})


class Signer:
    """The control plane's side: signs documents of a growing serial with a rotating key."""

    def __init__(self, marker: Path) -> None:
        self.keys = [Ed25519PrivateKey.generate()]
        self.chain: list[envelope.Link] = []
        self.marker = marker

    @property
    def public_b64(self) -> str:
        return envelope.b64(envelope.public_raw(self.keys[0].public_key()))

    def rotate(self) -> None:
        new = Ed25519PrivateKey.generate()
        self.chain.append(envelope.make_link(self.keys[-1], envelope.public_raw(new.public_key()), "x"))
        self.keys.append(new)

    def document(self, serial: int, expires: float, key: Ed25519PrivateKey | None = None) -> bytes:
        item = wire.DeploymentItem(
            id=f"item-{serial}",
            name="10_mark",
            group="script",
            creation_time=envelope.iso(T0),
            config='#!/bin/sh\necho "$SERIAL" >> "$MARKER"\n',
            inputs=(wire.InputItem("MARKER", str(self.marker)), wire.InputItem("SERIAL", str(serial))),
        )
        meta = {item.id: wire.ItemMeta(f"dep-{serial}", 1, f"sha256:{serial}", "CREATE", 30.0)}
        doc = wire.Document(SERVER, serial, envelope.iso(T0), (item,), meta, expires_at=envelope.iso(expires))
        return envelope.sign(doc.to_json(), key or self.keys[-1], self.chain)


@pytest.fixture
async def setup(aiohttp_server: Any, tmp_path: Path) -> AsyncIterator[Any]:
    store = Store()
    server = await aiohttp_server(store.app())
    http = Session()
    signer = Signer(tmp_path / "marker")

    def agent(policy: str = "signed") -> Agent:
        base = str(server.make_url("")).rstrip("/")
        cfg = AgentConfig(
            url=base,
            server_id=SERVER,
            name="web-1",
            credential="not-a-real-credential",
            document_url=f"{base}/doc",
            heartbeat_url=f"{base}/hb",
            control_public_key=signer.public_b64,
            document_policy=policy,
        )
        (tmp_path / "state").mkdir(mode=0o700, exist_ok=True)
        a = Agent(cfg, tmp_path / "state")
        a.clock = lambda: T0
        a._http = http  # poll() outside run()/once() uses the agent's session
        return a

    yield store, signer, agent
    http.close()


def runs(signer: Signer) -> list[str]:
    return signer.marker.read_text().split() if signer.marker.exists() else []


async def test_a_signed_document_runs(setup: Any) -> None:
    """Baseline: a fresh document signed by the pinned key runs its deployment."""
    store, signer, make = setup
    store.body = signer.document(5, T0 + 100)
    assert await make().once() == 0
    assert runs(signer) == ["5"]


@pytest.mark.catalogue("R12")
async def test_rollback_to_an_older_signed_document_is_rejected(setup: Any) -> None:
    """R12: serials n-1 and n-5, validly signed, are refused, also once the held copy expired."""
    store, signer, make = setup
    store.body = signer.document(6, T0 + 100)
    agent = make()
    await agent.once()
    older = [signer.document(5, T0 + 1000), signer.document(1, T0 + 1000)]
    for clock in (T0, T0 + 500):  # second round: the held serial 6 has expired
        agent = make()  # a restarted agent: the highest serial comes from the ledger
        agent.clock = lambda c=clock: c
        for body in older:
            store.body = body
            with pytest.raises(DocumentRejectedError, match="older than 6"):
                await agent.poll(wait=0)
        await agent.work()
    assert runs(signer) == ["6"]
    assert agent.ledger.rejections()["counts"]["rollback"] == 4


@pytest.mark.catalogue("R13")
async def test_a_frozen_document_is_reported_and_not_applied(setup: Any) -> None:
    """R13: when only an expired document is served, nothing runs and 'frozen' is reported."""
    store, signer, make = setup
    agent = make()
    store.body = signer.document(3, T0 + 100)
    assert await agent.poll(wait=0)  # accepted but not yet run
    agent.clock = lambda: T0 + 101  # the store keeps serving serial 3 past its expiry
    assert not await agent.poll(wait=0)
    assert await agent.work() == 0
    assert agent.status()["frozen"] is True
    store.body = signer.document(4, T0 + 50)  # a newer serial, but already expired
    with pytest.raises(DocumentRejectedError, match="expired"):
        await agent.poll(wait=0)
    assert await agent.once() == 0
    assert runs(signer) == []
    counts = agent.ledger.rejections()["counts"]
    assert counts["expired"] >= 2
    reported = store.heartbeats[-1]["rejections"]
    assert reported["counts"]["expired"] >= 2
    assert any("frozen" in r["reason"] for r in reported["last"])


@pytest.mark.catalogue("R14")
async def test_every_byte_flip_through_the_agent_is_rejected(setup: Any) -> None:
    """R14: the agent refuses each single-byte flip of a served document; no hook runs."""
    store, signer, make = setup
    agent = make()
    good = signer.document(9, T0 + 100)
    for i in range(len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x01
        store.body = bytes(bad)
        with pytest.raises(DocumentRejectedError):
            await agent.poll(wait=0)
    await agent.work()
    assert runs(signer) == []
    assert sum(agent.ledger.rejections()["counts"].values()) == len(good)
    store.body = good  # the genuine one still goes through afterwards
    assert await agent.once() == 0
    assert runs(signer) == ["9"]


async def test_unsigned_documents_need_the_heat_compatible_policy(setup: Any) -> None:
    """Heat's own unsigned document is refused by default and runs only under heat-compatible."""
    store, signer, make = setup
    signed = json.loads(signer.document(2, T0 + 100))
    del signed["anneal"]
    store.body = json.dumps(signed).encode()
    agent = make()
    with pytest.raises(DocumentRejectedError, match="unsigned"):
        await agent.poll(wait=0)
    await agent.work()
    assert runs(signer) == []
    agent.ledger.close()
    assert await make("heat-compatible").once() == 0
    assert runs(signer) == ["2"]
    with pytest.raises(ConfigError, match="document_policy"):
        make("none")


@pytest.mark.catalogue("R15")
async def test_key_rotation_is_adopted_through_the_chain_and_the_old_key_revoked(setup: Any) -> None:
    """R15: after a rotation the agent follows the chain, pins the new key and refuses the old one."""
    store, signer, make = setup
    old_key = signer.keys[0]
    signer.rotate()
    store.body = signer.document(10, T0 + 100)
    agent = make()
    assert await agent.once() == 0
    new_id = envelope.key_id(envelope.public_raw(signer.keys[1].public_key()))
    assert agent.status()["trusted_key_id"] == new_id
    agent.ledger.close()
    agent = make()  # the pin survives a restart
    assert agent.status()["trusted_key_id"] == new_id
    store.body = signer.document(11, T0 + 100, key=old_key)  # replay with the revoked key
    with pytest.raises(DocumentRejectedError, match="revoked"):
        await agent.poll(wait=0)
    signer.rotate()
    store.body = signer.document(12, T0 + 100)
    assert await agent.once() == 0
    assert runs(signer) == ["10", "12"]
    stored = agent.ledger.get_state("trusted_key")
    assert stored == base64.b64encode(envelope.public_raw(signer.keys[2].public_key())).decode()
