"""SWIFT transport end to end: real Swift (tempauth + tempurl), real control plane, real agents.

The agent enrols over HTTP, reads a document naming SWIFT, and from then on polls its
document through a GET TempURL and PUTs its signals to per-deployment TempURLs; the
control plane collects them by listing the signal container.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import agent_status, ledger_state
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import free_port, stop_process
from tests.support.relay import start_relay
from tests.support.swift import Swift, swift_args
from tests.support.templates import said_stack
from tests.support.waiting import wait_until

TEMPLATE = said_stack("POLL_TEMP_URL")


@pytest.fixture
def swift_cp(swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    """A control plane with SWIFT, S3 (Swift's s3api, which checks SigV4 signatures) and RELAY configured."""
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)  # secrets stay out of argv
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    prefix = "t" + "".join(c for c in tmp_path.name[-14:].lower() if c.isalnum())
    relay_port = free_port()
    cp = start_control_plane(
        tmp_path,
        *swift_args(
            swift_server,
            prefix,
            f"--s3-endpoint={swift_server.url}",
            f"--s3-access-key={swift_server.user}",
            f"--relay-url=http://127.0.0.1:{relay_port}",
        ),
    )
    relay = start_relay(tmp_path, relay_port, cp.url)
    yield cp
    stop_process(relay)
    stop_control_plane(cp)


def test_swift_transport_runs_deployments_and_collects_signals(
    swift_cp: ControlPlane, swift_server: Swift
) -> None:
    """On SWIFT the agent polls a bounded read-only TempURL and its signals come back through Swift."""
    cp = swift_cp
    assert 201 == cp.create("sw", TEMPLATE).status
    assert "CREATE_COMPLETE" == cp.wait_stack("sw")["status"]
    assert {"said": "said one"} == cp.outputs("sw")
    server = cp.api("GET", "/v1/servers/sw-box").body
    assert "SWIFT" == server["transport"]

    # The agent now polls Swift: its stored transport names a TempURL on the Swift proxy.
    section = json.loads(ledger_state(cp.agent_dir("sw-box"), "transport") or "{}")
    assert "SWIFT" == section["kind"]
    assert section["document_url"].startswith(swift_server.url + "/v1/AUTH_test/")
    assert "temp_url_expires=" in section["document_url"]
    assert "temp_url_sig=" in section["document_url"]
    assert section["expires"] - time.time() <= 2 * 86400 + 900 + 60  # bounded lifetime (default + margin)
    with urllib.request.urlopen(section["document_url"], timeout=30) as resp:
        stored = json.loads(resp.read())
    assert server["id"] == stored["anneal"]["server_id"]

    # An update goes through Swift both ways; the signal container is emptied once imported.
    body = {"template": TEMPLATE, "parameters": {"message": "two"}}
    assert 202 == cp.api("PUT", "/v1/stacks/sw", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("sw")["status"]
    assert {"said": "said two"} == cp.outputs("sw")
    prefix = section["document_url"].split("/v1/AUTH_test/")[1].split("-documents/")[0]
    wait_until(lambda: swift_server.list_objects(f"{prefix}-signals") == [], "signal container emptied", 90)
    log = cp.log.read_text()
    assert log.count("SWIFT: signal for deployment") >= 2
    assert f"{server['id']}.json" in swift_server.list_objects(f"{prefix}-documents")

    # The document URL cannot be turned into a write, and a signal URL writes only its own object.
    put = urllib.request.Request(section["document_url"], data=b"{}", method="PUT")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(put, timeout=30)
    err.value.close()
    assert 401 == err.value.code


def test_s3_transport_through_presigned_urls(swift_cp: ControlPlane, swift_server: Swift) -> None:
    """On S3 the agent follows presigned URLs (at most 7 days; forged: 403) and signals through the store."""
    cp = swift_cp
    template = said_stack("S3")
    assert 201 == cp.create("s3", template).status
    assert "CREATE_COMPLETE" == cp.wait_stack("s3")["status"]
    assert {"said": "said one"} == cp.outputs("s3")
    section = json.loads(ledger_state(cp.agent_dir("s3-box"), "transport") or "{}")
    assert "S3" == section["kind"]
    url = section["document_url"]
    assert url.startswith(swift_server.url + "/")
    assert "X-Amz-Signature=" in url
    expires_in = int(url.split("X-Amz-Expires=")[1].split("&")[0])
    assert 0 < expires_in <= 7 * 24 * 3600
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert (
            cp.api("GET", "/v1/servers/s3-box").body["id"] == json.loads(resp.read())["anneal"]["server_id"]
        )
    sig = url.split("X-Amz-Signature=")[1][:64]
    forged = url.replace(sig, ("0" if sig[0] != "0" else "1") + sig[1:])
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(forged, timeout=30)
    err.value.close()
    assert 403 == err.value.code

    body = {"template": template, "parameters": {"message": "two"}}
    assert 202 == cp.api("PUT", "/v1/stacks/s3", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("s3")["status"]
    assert {"said": "said two"} == cp.outputs("s3")
    assert cp.log.read_text().count("S3: signal for deployment") >= 2


def agent_kind(cp: ControlPlane, server: str) -> str | None:
    """The transport kind the agent of *server* follows (None before it stored one)."""
    kind = json.loads(ledger_state(cp.agent_dir(server), "transport") or "{}").get("kind")
    return None if kind is None else str(kind)


def test_switching_transport_on_a_live_server_loses_nothing(swift_cp: ControlPlane, tmp_path: Path) -> None:
    """SWIFT -> S3 -> RELAY -> SWIFT -> RELAY -> HTTP -> SWIFT -> HTTP, each switch in the same
    update as a new deployment generation."""
    cp = swift_cp
    assert 201 == cp.create("mv", TEMPLATE).status
    assert "CREATE_COMPLETE" == cp.wait_stack("mv")["status"]
    kinds = ("S3", "RELAY", "SWIFT", "RELAY", "HTTP", "SWIFT", "POLL_SERVER_HEAT")
    for step, kind in enumerate(kinds, start=2):
        body = {"template": said_stack(kind), "parameters": {"message": f"m{step}"}}
        assert 202 == cp.api("PUT", "/v1/stacks/mv", body).status
        assert "UPDATE_COMPLETE" == cp.wait_stack("mv")["status"], cp.log.read_text()[-3000:]
        assert {"said": f"said m{step}"} == cp.outputs("mv")
        expected = {"POLL_SERVER_HEAT": "HTTP"}.get(kind, kind)
        wait_until(lambda: agent_kind(cp, "mv-box") == expected, f"agent on {expected}", 90)  # noqa: B023 (waited for here)
        assert expected == cp.api("GET", "/v1/servers/mv-box").body["transport"]
    deployments = cp.api("GET", "/v1/deployments?stack=mv").body
    assert ["COMPLETE"] == [d["status"] for d in deployments]
    # The agent ran each generation exactly once, and has no signal left to send.
    status = agent_status(cp.agent_dir("mv-box"))
    assert list(range(1, len(kinds) + 2)) == sorted(e["generation"] for e in status["entries"])
    assert {"signalled"} == {e["state"] for e in status["entries"]}
    assert 0 == status["queued"]
    # While on RELAY its documents came through the relay (which keeps the newest per agent).
    assert [] != list((tmp_path / "relay" / "documents").iterdir())
    assert [] == list((tmp_path / "relay" / "refused").iterdir())


@pytest.mark.catalogue("R07")
@pytest.mark.catalogue("R08")
def test_swift_signal_urls_are_scoped_and_replays_are_harmless(
    swift_cp: ControlPlane, swift_server: Swift
) -> None:
    """R07/R08 through the store: duplicates idempotent, stale generations refused, forged URLs 401."""
    cp = swift_cp
    slow = said_stack("POLL_TEMP_URL", before="sleep 4; ")
    assert 201 == cp.create("sc", slow).status
    urls: dict[str, str] = {}

    def grab() -> bool:
        try:
            raw = ledger_state(cp.agent_dir("sc-box"), "transport")
        except sqlite3.OperationalError:
            return False  # the agent has not made its ledger yet
        if not raw or json.loads(raw).get("kind") != "SWIFT":
            return False
        with urllib.request.urlopen(json.loads(raw)["document_url"], timeout=30) as resp:
            signals = json.loads(resp.read())["anneal"]["transport"]["signals"]
        for target in signals.values():
            urls["gen1"] = target["url"]
        return bool(urls)

    wait_until(grab, "a signal URL in the stored document", 90)
    assert "CREATE_COMPLETE" == cp.wait_stack("sc")["status"]
    url = urls["gen1"]

    def put(target: str, body: bytes) -> int:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(target, data=body, method="PUT"), timeout=30
            ) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            e.close()  # its unread body holds the connection
            return e.code

    signal = json.dumps({"deploy_status_code": 0, "said": "forged"}).encode()
    # A replay of the same generation: accepted by the store, answered as a duplicate, nothing changes.
    assert 201 == put(url, signal)
    wait_until(lambda: "(duplicate)" in cp.log.read_text(), "the duplicate imported", 90)
    assert {"said": "said one"} == cp.outputs("sc")
    # Another object, or a changed signature: the store refuses (R08), 200 guesses, 0 hits.
    path, query = url.split("?", 1)
    assert 401 == put(path.rsplit("/", 2)[0] + "/00000000-0000-0000-0000-000000000000/1?" + query, signal)
    sig = query.split("temp_url_sig=")[1].split("&")[0]
    for i in range(200):
        guess = f"{random.getrandbits(256):064x}"
        assert 401 == put(url.replace(sig, guess), signal), i
    # After the next generation, the old URL still writes its own object but the signal is stale.
    body = {"template": slow, "parameters": {"message": "two"}}
    assert 202 == cp.api("PUT", "/v1/stacks/sc", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("sc")["status"]
    assert 201 == put(url, signal)
    wait_until(lambda: "is stale" in cp.log.read_text(), "the stale signal refused", 90)
    assert {"said": "said two"} == cp.outputs("sc")


async def test_swift_store_signal_url_and_collection(swift_server: Swift) -> None:
    """The store API in-process: a TEMP_URL_SIGNAL-style PUT URL, listing, import once, delete."""
    import asyncio

    from control.transports.publisher import Transports, collect
    from control.transports.store import Lifetimes
    from control.transports.swift import SwiftConfig, SwiftStore

    store = SwiftStore(
        SwiftConfig(swift_server.auth_url, swift_server.user, swift_server.key, "unit"), b"k" * 32
    )
    ready = asyncio.Event()

    async def on_ready() -> None:
        ready.set()

    await store.start(on_ready)
    try:
        await asyncio.wait_for(ready.wait(), 60)
        transports = Transports([store], Lifetimes(need=300, margin=900))
        url = transports.signal_url("SWIFT", "dep-1", 4)
        assert url is not None and "/unit-signals/dep-1/4?temp_url_sig=" in url
        assert transports.signal_url("S3", "dep-1", 4) is None
        expires = int(url.split("temp_url_expires=")[1])
        assert 0 < expires - time.time() <= 1200 + 5
        body = b'{"deploy_status_code": 0}'
        req = urllib.request.Request(url, data=body, method="PUT")
        response = await asyncio.to_thread(urllib.request.urlopen, req, None, 30)
        response.close()
        got: list[tuple[str, str, int, bytes]] = []

        async def intake(kind: str, dep: str, gen: int, raw: bytes) -> None:
            got.append((kind, dep, gen, raw))

        assert 1 == await collect(store, intake)
        assert [("SWIFT", "dep-1", 4, body)] == got
        assert 0 == await collect(store, intake)  # deleted after import: the next listing is empty
    finally:
        await store.close()
