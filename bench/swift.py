"""Swift transport at 200 agents polling every 5 s, against the HTTP transport in the same run.

`python bench/swift.py [--agents 200] [--interval 5] [--rounds 3] [--idle 60]`

Starts a real Swift all-in-one (tests/support/swift.py; `make tools` installs it) and a
control plane with SWIFT configured. Two fleets of simulated agents in this process:

* HTTP (baseline): polls `GET /v1/agent/document` on the control plane every *interval*
  seconds with `If-None-Match` (the same cadence, so the comparison is the transport).
* SWIFT: polls its GET TempURL every *interval* seconds with `If-None-Match`, through the
  agent's own transport code (`agent.transports.tempurl.fetch`).

Figures, per fleet: publish-to-hook-start latency p50/p99 over *rounds* rollouts (publish
= the deployment's `started_at`; hook start = a document carrying the new generation in
the simulated agent's hand, as in bench/latency.py), requests per idle agent per minute,
and control-plane CPU while the fleet is idle (and the Swift proxy's, for the store side).
Results go to bench/results/swift-<date>.json and stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agent.errors import SourceNotAvailableError  # noqa: E402
from agent.httpclient import ClientError, Session  # noqa: E402
from agent.transports import tempurl  # noqa: E402
from bench.harness import (  # noqa: E402
    Api,
    Server,
    cpu_seconds,
    deployments_template,
    percentile,
    random_key,
    start_plane,
)
from tests.support.controlplane import ControlPlane  # noqa: E402
from tests.support.processes import stop_process  # noqa: E402
from tests.support.proxy import Front  # noqa: E402
from tests.support.swift import Swift, start_swift  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def proc_cpu(pid: int) -> float:
    """CPU seconds of *pid* and its children (none with `workers = 0`, as tests/support/swift.py runs Swift)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):
                total += proc_cpu(int(child))
    return total


class Sim:
    """One simulated agent: polls every *interval* s, notes when each generation is in hand."""

    def __init__(self, server: Server, kind: str, cp: ControlPlane) -> None:
        self.server, self.kind, self.cp = server, kind, cp
        self.section: dict[str, Any] = {}
        self.etag = ""
        self.polls = 0
        self.errors = 0
        self.seen: dict[tuple[str, int], float] = {}
        self.highest = 0

    async def poll(self, http: aiohttp.ClientSession, store: Session) -> None:
        self.polls += 1
        if self.kind == "SWIFT" and self.section.get("kind") == "SWIFT":
            fetched = await tempurl.fetch(store, self.section, self.etag, 0)
            status, body, etag = (200 if fetched.body is not None else 304), fetched.body, fetched.etag
        else:
            headers = {"Authorization": f"Bearer {self.server.credential}"}
            if self.etag:
                headers["If-None-Match"] = self.etag
            async with http.get(f"{self.cp.url}/v1/agent/document", headers=headers) as resp:
                status, body, etag = resp.status, await resp.read(), resp.headers.get("ETag", "")
        now = time.time()
        if status != 200 or body is None:
            return
        doc = json.loads(body)["anneal"]
        self.etag = etag
        section = doc.get("transport") or {}
        if section.get("kind") != self.section.get("kind"):
            self.etag = ""  # a new place: its first poll fetches afresh, as the agent does
        self.section = section
        for meta in doc["deployments"].values():
            key = (str(meta["deployment_id"]), int(meta["generation"]))
            self.seen.setdefault(key, now)
            self.highest = max(self.highest, key[1])

    async def run(self, http: aiohttp.ClientSession, store: Session, interval: float) -> None:
        await asyncio.sleep(random.uniform(0, interval))
        while True:
            try:
                await self.poll(http, store)
            except (aiohttp.ClientError, ClientError, TimeoutError, SourceNotAvailableError):
                self.errors += 1
            await asyncio.sleep(interval)


async def enrol_servers(api: Api, prefix: str, n: int, kind: str) -> list[tuple[Server, dict[str, Any]]]:
    """*n* servers on transport *kind*, enrolled as agents would be: each with its enrolment
    answer's transport section (where its first document comes from)."""
    gate = asyncio.Semaphore(8)

    async def one(i: int) -> tuple[Server, dict[str, Any]]:
        name = f"{prefix}-{i}"
        async with gate:
            created = await api.call("POST", "/v1/servers", {"name": name, "transport": kind})
            body = {
                "token": created["enrol_token"],
                "public_keys": {"sign": random_key(), "box": random_key()},
            }
            got = await api.call("POST", "/v1/agent/enrol", {**body, "hostname": name}, expect=(201,))
        return Server(name, got["server_id"], got["credential"]), dict(got["transport"])

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def make_servers(api: Api, prefix: str, n: int, kind: str) -> list[Server]:
    return [server for server, _ in await enrol_servers(api, prefix, n, kind)]


async def wait_ready(api: Api, timeout: float = 60) -> None:
    """Until a server created now is given a SWIFT section (the control plane's containers are set up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ((_, section),) = await enrol_servers(api, f"probe-{time.time_ns()}", 1, "SWIFT")
        if section.get("kind") == "SWIFT":
            return
        await asyncio.sleep(0.5)
    raise SystemExit("Swift never became ready for the control plane")


@contextlib.contextmanager
def swift_control_plane(
    prefix: str, interval: float, extra: Sequence[str] = (), front: bool = False
) -> Iterator[tuple[Swift, ControlPlane, Front | None]]:
    """A real Swift all-in-one and `anneal serve` (SQLite) with SWIFT on, in a fresh temp dir.

    With *front*, the control plane (and whoever uses the TempURLs it gives out) reaches Swift
    through a TCP front (tests/support/proxy.py) that can blackhole it. Everything is
    stopped (by PID) and removed on exit.
    """
    work = Path(tempfile.mkdtemp(prefix=f"anneal-bench-{prefix}-"))
    swift = start_swift(work / "swift")
    proxy = Front([swift.proxy_port]) if front else None
    auth_url = f"http://127.0.0.1:{proxy.port}/auth/v1.0" if proxy else swift.auth_url
    os.environ["ANNEAL_SWIFT_KEY"] = swift.key
    try:
        cp = start_plane(
            work,
            extra=[
                f"--swift-auth-url={auth_url}",
                f"--swift-user={swift.user}",
                f"--store-poll-interval={interval}",
                "--provisioner=enrol",
                *extra,
            ],
        )
        try:
            yield swift, cp, proxy
        finally:
            stop_process(cp.proc)
    finally:
        if proxy is not None:
            proxy.stop()
        swift.stop()
        shutil.rmtree(work, ignore_errors=True)


async def fleet_run(
    api: Api, cp: ControlPlane, swift: Swift, kind: str, n: int, interval: float, rounds: int, idle: float
) -> dict[str, Any]:
    stack = f"b{kind.lower()}"
    servers = await make_servers(api, stack, n, kind)
    names = [s.name for s in servers]
    await api.put_stack(stack, deployments_template(names, 1, "round 0"), create=True)
    assert (await api.wait_stack(stack, 600)).endswith("COMPLETE")
    sims = [Sim(s, kind, cp) for s in servers]
    connector = aiohttp.TCPConnector(limit=n + 10)
    timeout = aiohttp.ClientTimeout(total=30)
    # Store polls go through the agent's own HTTP client, as many connections as agents.
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http, Session(n + 10) as store:
        for sim in sims:  # the first document (over HTTP) names the transport, as for a real agent
            await sim.poll(http, store)
        tasks = [asyncio.create_task(s.run(http, store, interval)) for s in sims]
        try:
            await asyncio.sleep(interval * 2)  # everyone has moved and settled
            # Idle: nothing changes; count requests and CPU.
            polls0, cpu0, sw0 = (
                sum(s.polls for s in sims),
                cpu_seconds(cp.proc.pid),
                proc_cpu(swift.pids["proxy"]),
            )
            t0 = time.monotonic()
            await asyncio.sleep(idle)
            elapsed = time.monotonic() - t0
            idle_polls = sum(s.polls for s in sims) - polls0
            cp_cpu = (cpu_seconds(cp.proc.pid) - cpu0) / elapsed
            proxy_cpu = (proc_cpu(swift.pids["proxy"]) - sw0) / elapsed
            # Rollouts: one new generation on every server per round.
            latencies: list[float] = []
            missed = 0
            for k in range(1, rounds + 1):
                await api.put_stack(stack, deployments_template(names, 1, f"round {k}"), create=False)
                deadline = time.monotonic() + interval * 6 + 60
                while time.monotonic() < deadline and not all(s.highest >= k + 1 for s in sims):
                    await asyncio.sleep(0.05)
                await api.wait_stack(stack, 600)
                deps = await api.call("GET", f"/v1/deployments?stack={stack}")
                by_server = {s.server.server_id: s for s in sims}
                for dep in deps:
                    full = await api.call("GET", f"/v1/deployments/{dep['id']}")
                    got = by_server[full["server_id"]].seen.get((full["id"], k + 1))
                    if got is None:
                        missed += 1
                    else:
                        latencies.append(got - full["started_at"])
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "agents": n,
        "interval_s": interval,
        "latency_p50_s": percentile(latencies, 50),
        "latency_p99_s": percentile(latencies, 99),
        "latency_n": len(latencies),
        "missed": missed,
        "idle_requests_per_agent_per_min": idle_polls / n / (elapsed / 60),
        "idle_control_plane_cpu_pct": 100 * cp_cpu,
        "idle_swift_proxy_cpu_pct": 100 * proxy_cpu,
        "errors": sum(s.errors for s in sims),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with swift_control_plane("swift", args.interval) as (swift, cp, _):
        async with aiohttp.ClientSession() as session:
            api = Api(session, cp)
            await wait_ready(api)
            results = {}
            for kind in ("HTTP", "SWIFT"):
                results[kind] = await fleet_run(
                    api, cp, swift, kind, args.agents, args.interval, args.rounds, args.idle
                )
                print(kind, json.dumps(results[kind], indent=1), flush=True)
        return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=200)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--idle", type=float, default=60.0)
    args = p.parse_args()
    results = asyncio.run(main_async(args))
    http, sw = results["HTTP"], results["SWIFT"]
    ratio = (
        sw["idle_control_plane_cpu_pct"] / http["idle_control_plane_cpu_pct"]
        if http["idle_control_plane_cpu_pct"]
        else None
    )
    out = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "results": results,
        "swift_vs_http_idle_control_plane_cpu_ratio": ratio,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"swift-{datetime.date.today().isoformat()}.json"
    path.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
