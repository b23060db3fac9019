"""R07 and R08 at catalogue scale, over HTTP, against a real control plane (`anneal serve`, SQLite).

R07: simulated agents (in this process; real agents would cost a process each, and the
control plane sees the same requests) answer every deployment generation; their signals
pass a fault proxy (tests/support/faultproxy.py) that duplicates 30 %, reorders 10 %,
delays some, and replays 5 % from the previous generation. Pass: final outputs equal the
reference for 100 %; 0 stale signals accepted; events stored = unique signals.

R08: agent A's credential, and A's own signal URL, against B's deployments: 403, no change
on B, an audit line in the control plane's log; then random 128-bit guesses of signal URLs:
0 hits.

Sizes: ``R07_DEPLOYMENTS`` (default 100; the catalogue figure is 1000), ``R07_DELAY``
(seconds a delayed signal is held; default 3, catalogue 60), ``R08_GUESSES`` (default
2000; catalogue 100000). The full-size figures are in docs/performance.md.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent import sealed, wire
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.faultproxy import FaultProxy, Rates
from tests.support.processes import free_port

DEPLOYMENTS = int(os.environ.get("R07_DEPLOYMENTS", "100"))
DELAY = float(os.environ.get("R07_DELAY", "3"))
GUESSES = int(os.environ.get("R08_GUESSES", "2000"))
PER_SERVER = 10
FINAL = frozenset({400, 403, 404, 409, 410, 413})


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("r07"), "--provisioner=enrol")
    yield plane
    stop_control_plane(plane)


@dataclass
class SimServer:
    """An enrolled server as a simulated agent sees it: its credential and its box key."""

    name: str
    server_id: str
    credential: str
    box: X25519PrivateKey
    answered: set[tuple[str, int]] = field(default_factory=set)


class Client:
    def __init__(self, http: aiohttp.ClientSession, cp: ControlPlane) -> None:
        self.http, self.cp = http, cp

    async def call(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token or self.cp.token}"}
        async with self.http.request(
            method, self.cp.url + path, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=300)
        ) as resp:
            return resp.status, await resp.json(content_type=None)

    async def enrol(self, name: str) -> SimServer:
        status, created = await self.call("POST", "/v1/servers", {"name": name})
        assert 201 == status, created
        box = X25519PrivateKey.generate()
        raw = box.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        keys = {"sign": base64.b64encode(os.urandom(32)).decode(), "box": base64.b64encode(raw).decode()}
        body = {"token": created["enrol_token"], "public_keys": keys, "hostname": name}
        status, got = await self.call("POST", "/v1/agent/enrol", body)
        assert 201 == status, got
        return SimServer(name, got["server_id"], got["credential"], box)

    async def wait_stack(self, name: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = str((await self.call("GET", f"/v1/stacks/{name}"))[1]["status"])
            if not status.endswith("IN_PROGRESS"):
                return status
            await asyncio.sleep(0.5)
        raise AssertionError(f"stack {name} still in progress after {timeout} s")


def template(
    servers: list[SimServer], per_server: int, round_: int, transport: str = "HTTP"
) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "inputs": [{"name": "VALUE"}], "outputs": [{"name": "said"}]},
        }
    }
    for i, server in enumerate(servers):
        resources[f"srv{i}"] = {"type": "OS::Heat::DeployedServer", "properties": {"name": server.name}}
        for j in range(per_server):
            resources[f"dep{i}_{j}"] = {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {
                    "config": {"get_resource": "cfg"},
                    "server": {"get_resource": f"srv{i}"},
                    "signal_transport": transport,
                    "input_values": {"VALUE": f"r{round_}-{i}-{j}"},
                },
            }
    return {"heat_template_version": "2018-08-31", "resources": resources}


def opened(server: SimServer, doc: wire.Document, item: wire.DeploymentItem) -> wire.DeploymentItem:
    meta = doc.meta[item.id]
    return sealed.open_item(item, list(meta.sealed), server.server_id, server.box) if meta.sealed else item


async def fetch(
    client: Client, server: SimServer, etag: str = "", wait: float = 0
) -> tuple[str, wire.Document | None]:
    headers = {"Authorization": f"Bearer {server.credential}"}
    if etag:
        headers["If-None-Match"] = etag
    url = f"{client.cp.url}/v1/agent/document?wait={wait:g}"
    async with client.http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=wait + 60)) as resp:
        if resp.status == 304:
            return etag, None
        assert 200 == resp.status, await resp.text()
        return resp.headers.get("ETag", ""), wire.decode_document(await resp.read())


def signal_body(item: wire.DeploymentItem, generation: int, outputs: dict[str, Any]) -> dict[str, Any]:
    extra = {"config_id": item.id, "nonce": secrets.token_hex(16), "generation": generation}
    return wire.Signal(0, "", "", outputs, extra).to_json()


async def sim_agent(client: Client, server: SimServer, via: str, stop: asyncio.Event) -> None:
    """Answer each new generation once, in order, with `done <VALUE>`, through the proxy at *via*."""
    etag = ""
    while not stop.is_set():
        try:
            etag, doc = await fetch(client, server, etag, wait=2)
        except (aiohttp.ClientError, TimeoutError):
            await asyncio.sleep(1)
            continue
        for item in doc.deployments if doc else ():
            meta = doc.meta.get(item.id) if doc else None
            if meta is None or meta.stop or (meta.deployment_id, meta.generation) in server.answered:
                continue
            plain = opened(server, doc, item)  # type: ignore[arg-type]
            url = str(plain.input_value("deploy_signal_id"))
            body = signal_body(plain, meta.generation, {"said": f"done {plain.input_value('VALUE')}"})
            for _ in range(30):  # the outbox: until a 2xx or a final refusal
                headers = {"Authorization": f"Bearer {server.credential}"}
                target = via + url[len(client.cp.url) :]
                async with client.http.post(target, json=body, headers=headers) as resp:
                    if 200 <= resp.status < 300 or resp.status in FINAL:
                        break
                await asyncio.sleep(1)
            server.answered.add((meta.deployment_id, meta.generation))


async def r07(cp: ControlPlane) -> dict[str, Any]:
    servers_n = max(1, DEPLOYMENTS // PER_SERVER)
    n = servers_n * PER_SERVER
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=servers_n + 50)) as http:
        client = Client(http, cp)
        servers = [await client.enrol(f"r07-{i}") for i in range(servers_n)]
        proxy = FaultProxy(cp.url, Rates(delay_seconds=DELAY))
        via = await proxy.start(free_port())
        stop = asyncio.Event()
        agents = [asyncio.create_task(sim_agent(client, s, via, stop)) for s in servers]
        began = time.monotonic()
        try:
            status, body = await client.call(
                "POST", "/v1/stacks", {"name": "r07", "template": template(servers, PER_SERVER, 1)}
            )
            assert 201 == status, body
            assert "CREATE_COMPLETE" == await client.wait_stack("r07", 300 + n)
            body = {"template": template(servers, PER_SERVER, 2)}
            assert 202 == (await client.call("PUT", "/v1/stacks/r07", body))[0]
            assert "UPDATE_COMPLETE" == await client.wait_stack("r07", 300 + n)
            await proxy.drain()
        finally:
            stop.set()
            await asyncio.gather(*agents, return_exceptions=True)
            await proxy.close()
        elapsed = time.monotonic() - began
        _, deployments = await client.call("GET", "/v1/deployments?stack=r07")
        gate = asyncio.Semaphore(16)

        async def said(dep: dict[str, Any]) -> tuple[str, Any]:
            async with gate:
                _, shown = await client.call("GET", f"/v1/deployments/{dep['id']}")
            return dep["resource_name"], shown["output_values"].get("said")

        outputs = dict(await asyncio.gather(*(said(d) for d in deployments)))
        _, events = await client.call("GET", "/v1/stacks/r07/events")
    return {"n": n, "proxy": proxy, "outputs": outputs, "events": events, "elapsed": elapsed}


@pytest.mark.catalogue("R07")
def test_duplicated_reordered_and_replayed_signals_give_the_reference_outputs(cp: ControlPlane) -> None:
    """R07: 100 % reference outputs, 0 stale signals accepted, one event per unique signal."""
    got = asyncio.run(r07(cp))
    n, proxy = got["n"], got["proxy"]
    reference = {f"dep{i}_{j}": f"done r2-{i}-{j}" for i in range(n // PER_SERVER) for j in range(PER_SERVER)}
    matching = sum(1 for k, v in reference.items() if got["outputs"].get(k) == v)
    accepted = Counter(
        (s.deployment_id, s.generation) for s in proxy.sent if 200 <= s.status < 300 and not s.duplicate
    )
    replays = [s for s in proxy.sent if s.kind == "replay"]
    stale_accepted = [s for s in replays if 200 <= s.status < 300 and not s.duplicate]
    duplicates = [s for s in proxy.sent if s.kind == "duplicate"]
    signal_events = [
        (e["deployment_id"], e["generation"])
        for e in got["events"]
        if e["deployment_id"] and e["status"] == "COMPLETE"
    ]
    print(
        f"\nR07: {n} deployments x 2 generations in {got['elapsed']:.0f} s; proxy {proxy.counts()}; "
        f"outputs matching {matching}/{n}; stale accepted {len(stale_accepted)}/{len(replays)} replays "
        f"(answers {dict(Counter(s.status for s in replays))}); duplicates answered "
        f"{dict(Counter((s.status, s.duplicate) for s in duplicates))}; "
        f"signal events {len(signal_events)} for {len(accepted)} unique accepted signals"
    )
    assert n == matching
    assert replays, "the proxy replayed nothing: the stale check would be empty"
    assert [] == stale_accepted
    assert {409} >= {s.status for s in replays}
    # Every other copy is answered as the duplicate it is; or, racing the original, "retry" (503,
    # nothing written: the real agent's outbox retries it); or stale when it arrives late.
    others = [s for s in proxy.sent if s.kind != "replay" and (s.status, s.duplicate) != (200, False)]
    assert duplicates and {(200, True), (503, None), (409, None)} >= {(s.status, s.duplicate) for s in others}
    assert 2 * n == len(accepted) and set(accepted.values()) == {1}
    assert len(signal_events) == len(set(signal_events)) == len(accepted)


async def r08(cp: ControlPlane) -> dict[str, Any]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        client = Client(http, cp)
        a, b = await client.enrol("r08-a"), await client.enrol("r08-b")
        resources = template([a, b], 1, 1, "HTTP")["resources"]
        resources["cfn_a"] = {
            **resources["dep0_0"],
            "properties": {**resources["dep0_0"]["properties"], "signal_transport": "CFN_SIGNAL"},
        }
        resources["cfn_b"] = {
            **resources["dep1_0"],
            "properties": {**resources["dep1_0"]["properties"], "signal_transport": "CFN_SIGNAL"},
        }
        status, body = await client.call(
            "POST",
            "/v1/stacks",
            {"name": "r08", "template": {"heat_template_version": "2018-08-31", "resources": resources}},
        )
        assert 201 == status, body
        deadline = time.monotonic() + 120
        while True:
            _, doc_a = await fetch(client, a)
            _, doc_b = await fetch(client, b)
            if doc_a and doc_b and len(doc_a.deployments) == 2 and len(doc_b.deployments) == 2:
                break
            assert time.monotonic() < deadline, "deployments not published"
            await asyncio.sleep(0.5)
        url_of = {
            doc.meta[i.id].deployment_id: (
                str(opened(s, doc, i).input_value("deploy_signal_id")),
                doc.meta[i.id].generation,
                i,
            )
            for s, doc in ((a, doc_a), (b, doc_b))
            for i in doc.deployments
        }
        _, b_deps = await client.call("GET", "/v1/deployments?server=r08-b")
        b_ids = [d["id"] for d in b_deps]
        before = [(await client.call("GET", f"/v1/deployments/{d}"))[1] for d in b_ids]
        a_cfn_url = next(u for d, (u, _, _) in url_of.items() if d not in b_ids and "?sig=" in u)
        a_sig = a_cfn_url.split("?sig=")[1]
        forged: list[tuple[str, int]] = []
        for dep in b_ids:
            url, gen, item = url_of[dep]
            body = signal_body(item, gen, {"said": "forged"})
            path = url.split("?")[0][len(cp.url) :]
            for target, token in (
                (path, a.credential),
                (f"{path}?sig={a_sig}", None),
                (f"{path}?sig={a_sig}", a.credential),
            ):
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with http.post(cp.url + target, json=body, headers=headers) as resp:
                    forged.append((target, resp.status))
        after = [(await client.call("GET", f"/v1/deployments/{d}"))[1] for d in b_ids]

        # Guesses: a random 128-bit signature on B's real URL, or a random deployment id and signature.
        real_path = url_of[b_ids[0]][0].split("?")[0][len(cp.url) :]
        body = signal_body(url_of[b_ids[0]][2], 1, {"said": "guessed"})
        statuses: Counter[int] = Counter()
        gate = asyncio.Semaphore(32)
        began = time.monotonic()

        async def guess(k: int) -> None:
            path = real_path if k % 2 else f"/v1/signal/{uuid.uuid4()}/1"
            async with gate, http.post(f"{cp.url}{path}?sig={secrets.token_hex(16)}", json=body) as resp:
                statuses[resp.status] += 1

        for start in range(0, GUESSES, 1000):  # bounded: GUESSES requests, 1000 in flight at most
            await asyncio.gather(*(guess(k) for k in range(start, min(GUESSES, start + 1000))))
        rate = GUESSES / (time.monotonic() - began)
        final = [(await client.call("GET", f"/v1/deployments/{d}"))[1] for d in b_ids]
        # B itself still signals its own deployments: nothing was consumed by the forgeries.
        own = []
        for dep in b_ids:
            url, gen, item = url_of[dep]
            async with http.post(
                url,
                json=signal_body(item, gen, {"said": "genuine"}),
                headers={"Authorization": f"Bearer {b.credential}"},
            ) as resp:
                own.append(resp.status)
    return {
        "a": a,
        "b_ids": b_ids,
        "forged": forged,
        "before": before,
        "after": after,
        "final": final,
        "statuses": statuses,
        "rate": rate,
        "own": own,
    }


@pytest.mark.catalogue("R08")
def test_forged_signals_and_url_guesses_are_refused(cp: ControlPlane) -> None:
    """R08: A's credential or URL on B's deployments is 403 with an audit line; guesses never hit."""
    got = asyncio.run(r08(cp))
    print(
        f"\nR08: {len(got['forged'])} forged signals -> {dict(Counter(s for _, s in got['forged']))}; "
        f"{GUESSES} URL guesses -> {dict(got['statuses'])} at {got['rate']:.0f}/s"
    )
    assert {403} == {s for _, s in got["forged"]}
    assert got["before"] == got["after"] == got["final"]
    assert all(d["status"] == "IN_PROGRESS" and not d["output_values"].get("said") for d in got["final"])
    assert {403: GUESSES} == dict(got["statuses"])
    assert [200] * len(got["b_ids"]) == got["own"]
    log = Path(cp.log).read_text()
    for dep in got["b_ids"]:
        assert f"refused signal for deployment {dep} from the agent of server {got['a'].server_id}" in log
        assert f"refused signal for deployment {dep} generation 1: wrong signature" in log
