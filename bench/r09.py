"""R09 at fleet size: the object store blackholed for T seconds during a rollout to N simulated agents.

`python bench/r09.py [--agents 1000] [--outages 5,60,600] [--interval 30] [--cap 60]`

A real Swift all-in-one (tests/support/swift.py) behind a TCP front (tests/support/proxy.py)
that can blackhole it: open connections are cut and new ones are accepted and never answered.
The control plane (`anneal serve`, SQLite) reaches Swift through the front, and so do the agents.
N simulated agents in this process, each on SWIFT from its enrolment answer, poll their
document TempURL every *interval* seconds and PUT each new generation's signal to its
TempURL, with the agent's own code: `agent.transports.tempurl` for the requests and
`agent.transports.switch.backoff` (the real agent's back-off, *cap* = its `backoff_max`) after a failure,
counted from the failed request's start and with no signal sent while polls fail, as
agent/loop.py does (its signal retries wait for the poll loop; here a signal goes right
after a good poll, so both are one request stream per agent).

For each outage T: update the stack (a new generation on every server), blackhole the store
at once, wait T, end the blackhole. Figures:

* lost generations (a deployment not COMPLETE at the new generation, or answered other
  than once);
* requests *started* during the outage (each agent's timeline keeps every request's start,
  end, outcome and kind): a blackholed request hangs until the client's 30 s timeout or the
  store's return, so completed requests would hide the load. Against N / cap as a count:
  N x ceil(T / cap), each agent at most one request per cap-long stretch; for T shorter
  than the poll interval the ordinary polls that find the store down (N x T / interval)
  come first and no back-off can avoid them. Also: retries (requests after a failure),
  the most one agent started, and requests per 5 s from 30 s before to 150 s after;
* recovery, from the store's return: each agent's first good poll, when every agent held
  the new generation (p50, p90, max; against interval + cap), how many agents' first
  polls after the return still found the old document, when the control plane started
  the generation and when its store writer logged "writable again" (empty: no write
  failed, a hung write was cut at the return and retried by aiohttp at once);
* the time until the stack completes (the control plane reading 1,000 signals).

Results go to bench/results/r09-<date>.json and stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agent import wire  # noqa: E402
from agent.errors import SourceExpiredError, SourceNotAvailableError  # noqa: E402
from agent.httpclient import ClientError, Session  # noqa: E402
from agent.transports import tempurl  # noqa: E402
from agent.transports.switch import backoff  # noqa: E402
from bench.harness import Api, deployments_template  # noqa: E402
from bench.swift import enrol_servers, swift_control_plane, wait_ready  # noqa: E402
from tests.support.proxy import Front  # noqa: E402

RESULTS = ROOT / "bench" / "results"
T = TypeVar("T")


@dataclass
class StoreAgent:
    """One simulated agent on SWIFT: polls, answers each generation once, backs off like the agent."""

    name: str
    section: dict[str, Any]
    etag: str = ""
    failures: int = 0
    #: monotonic start of every request it made (polls and signal PUTs)
    requests: list[float] = field(default_factory=list)
    #: (start, end, ok, kind) of every request: "poll", "new" (a poll that brought a new
    #: document), "put" (a signal); ok is False for a failure (refused, cut, timed out)
    timeline: list[tuple[float, float, bool, str]] = field(default_factory=list)
    #: monotonic time of every successful poll
    good: list[float] = field(default_factory=list)
    #: (deployment, generation) -> monotonic time it was first in hand
    seen: dict[tuple[str, int], float] = field(default_factory=dict)
    answered: dict[tuple[str, int], int] = field(default_factory=dict)
    queue: dict[str, tuple[tuple[str, int], bytes]] = field(default_factory=dict)
    last_start: float = 0.0

    async def _timed(self, kind: str, call: Awaitable[T]) -> T:
        start = self.last_start = time.monotonic()
        self.requests.append(start)
        try:
            result = await call
        except BaseException:
            self.timeline.append((start, time.monotonic(), False, kind))
            raise
        ok = not (isinstance(result, tuple) and not 200 <= result[0] < 300)
        if kind == "poll" and getattr(result, "body", None) is not None:
            kind = "new"
        self.timeline.append((start, time.monotonic(), ok, kind))
        return result

    async def step(self, http: Session) -> None:
        fetched = await self._timed("poll", tempurl.fetch(http, self.section, self.etag, 0))
        self.good.append(time.monotonic())
        if fetched.body is None:
            return
        doc = wire.decode_document(fetched.body)
        self.etag = fetched.etag
        if isinstance(doc.transport, dict) and doc.transport.get("kind") == "SWIFT":
            self.section = dict(doc.transport)
        for item in doc.deployments:
            meta = doc.meta.get(item.id)
            if meta is None:
                continue
            key = (meta.deployment_id, meta.generation)
            self.seen.setdefault(key, time.monotonic())
            if key not in self.answered and item.id not in self.queue:
                extra = {"config_id": item.id, "nonce": secrets.token_hex(16), "generation": meta.generation}
                body = json.dumps(wire.Signal(0, "", "", {}, extra).to_json()).encode()
                self.queue[item.id] = (key, body)

    async def deliver(self, http: Session) -> None:
        for item_id, (key, body) in list(self.queue.items()):
            target = (self.section.get("signals") or {}).get(item_id)
            if not isinstance(target, dict) or "url" not in target:
                continue  # its URL comes with the next document
            status, reason = await self._timed("put", tempurl.deliver(http, "PUT", str(target["url"]), body))
            if 200 <= status < 300:
                self.answered[key] = self.answered.get(key, 0) + 1
                del self.queue[item_id]
            elif status == 0:
                raise SourceNotAvailableError(reason)

    async def run(self, http: Session, interval: float, cap: float) -> None:
        """As agent/loop.py: a poll every *interval* s, the signals after a good poll (none while
        the store is down), and after a failure the agent's back-off counted from the start of
        the failed request (a poll, or a signal PUT after a good poll)."""
        await asyncio.sleep(interval * (hash(self.name) % 1000) / 1000)  # spread, as agents are
        while True:
            try:
                await self.step(http)
                await self.deliver(http)
                self.failures = 0
                await asyncio.sleep(interval)
            except (SourceNotAvailableError, SourceExpiredError, ClientError, TimeoutError):
                self.failures += 1
                wait = backoff(self.failures, cap, interval)
                await asyncio.sleep(max(0.0, self.last_start + wait - time.monotonic()))


async def enrol(api: Api, n: int) -> list[StoreAgent]:
    agents = []
    for server, section in await enrol_servers(api, "r09", n, "SWIFT"):
        if section.get("kind") != "SWIFT":
            raise SystemExit(f"{server.name}: the enrolment answer names {section.get('kind')}, not SWIFT")
        agents.append(StoreAgent(server.name, section))
    return agents


def writer_returns(log: Path, since: float) -> list[float]:
    """Wall times of the control plane's "writable again" lines (its store writer's recovery) after *since*."""
    times = []
    for line in log.read_text(errors="replace").splitlines():
        if "writable again" in line:
            stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            t = time.mktime(stamp.timetuple()) + stamp.microsecond / 1e6
            if t >= since:
                times.append(t)
    return times


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def requests_during(agents: list[StoreAgent], out: float, back: float) -> dict[str, Any]:
    """Requests *started* in [out, back): each is one request the store (or the front) had to take.

    A blackholed request hangs until the client's 30 s timeout or until the blackhole ends
    (the front then cuts it), so counting completed requests would hide them; started ones
    are the load. A retry is a request started after the same agent's previous one failed.
    """
    per_agent, retries, completed = [], 0, 0
    for a in agents:
        inside = 0
        ordered = sorted(a.timeline)
        for i, (start, end, _ok, _kind) in enumerate(ordered):
            completed += out <= end < back
            if out <= start < back:
                inside += 1
                retries += i > 0 and not ordered[i - 1][2]
        per_agent.append(inside)
    return {"started": sum(per_agent), "retries": retries, "completed": completed, "per_agent": per_agent}


def histogram(agents: list[StoreAgent], out: float, back: float, bucket: float = 5.0) -> list[list[float]]:
    """[seconds from the outage's start, requests started in that bucket, of which failed] around the outage."""
    lo, hi = out - 30, back + 150
    counts: dict[int, list[int]] = {}
    for a in agents:
        for start, _end, ok, _kind in a.timeline:
            if lo <= start < hi:
                row = counts.setdefault(int((start - out) // bucket), [0, 0])
                row[0] += 1
                row[1] += not ok
    return [[k * bucket, v[0], v[1]] for k, v in sorted(counts.items())]


async def outage(
    api: Api,
    agents: list[StoreAgent],
    front: Front,
    generation: int,
    seconds: float,
    args: argparse.Namespace,
    log: Path,
) -> dict[str, Any]:
    names = [a.name for a in agents]
    await api.put_stack(
        "r09", deployments_template(names, 1, f"g{generation}", transport="CFN_SIGNAL"), create=False
    )
    await asyncio.to_thread(front.blackhole, True)
    out, out_wall = time.monotonic(), time.time()
    await asyncio.sleep(seconds)
    # The return starts here: ending the blackhole cuts the requests it held, and a client that
    # sees that cut at once (agent/httpclient.py) fails and retries before the call below returns.
    back, back_wall = time.monotonic(), time.time()
    await asyncio.to_thread(front.blackhole, False)
    in_hand_by = back + args.interval + args.cap
    while time.monotonic() < in_hand_by + 60 and not all(
        any(g == generation for (_, g) in a.seen) for a in agents
    ):
        await asyncio.sleep(0.5)
    status = await api.wait_stack("r09", timeout=600 + len(agents))
    done = time.monotonic()
    first_good = [min((t for t in a.good if t >= back), default=float("inf")) - back for a in agents]
    in_hand = [
        min((t for (_, g), t in a.seen.items() if g == generation), default=float("inf")) - back
        for a in agents
    ]
    # Polls after the return that still found the old document: the store did not hold the
    # new one yet, so the agent waited another interval.
    stale = [
        max(
            (s - back for s, _e, ok, kind in a.timeline if ok and kind == "poll" and back <= s < back + t),
            default=0.0,
        )
        for a, t in zip(agents, in_hand, strict=True)
    ]
    n, cap = len(agents), args.cap
    during = requests_during(agents, out, back)
    deployments = await api.call("GET", "/v1/deployments?stack=r09")
    lost = [d["id"] for d in deployments if d["status"] != "COMPLETE" or d["generation"] != generation]
    started = [float(d["started_at"]) - out_wall for d in deployments if d.get("started_at")]
    twice = [a.name for a in agents for k, c in a.answered.items() if c != 1]
    writer = writer_returns(log, back_wall - seconds)
    return {
        "outage_s": seconds,
        "outage_measured_s": back - out,
        "stack": status,
        "lost_generations": len(lost),
        "answered_other_than_once": len(twice),
        "requests_started_during_outage": during["started"],
        "requests_per_s_during_outage": during["started"] / seconds,
        "retries_started_during_outage": during["retries"],
        "requests_completed_during_outage": during["completed"],
        "max_requests_started_by_one_agent": max(during["per_agent"]),
        "bound_n_over_cap": n / cap,
        "ordinary_rate_n_over_interval": n / args.interval,
        "generation_started_after_outage_start_s": [min(started), max(started)] if started else None,
        "store_writer_back_after_return_s": [round(t - back_wall, 2) for t in writer],
        "first_good_poll_after_return_max_s": max(first_good),
        "new_generation_in_hand_after_return_s": {
            "p50": quantile(in_hand, 0.5),
            "p90": quantile(in_hand, 0.9),
            "max": max(in_hand),
        },
        "agents_with_a_stale_poll_after_return": sum(1 for x in stale if x > 0),
        "last_stale_poll_after_return_s": max(stale),
        "bound_interval_plus_cap_s": args.interval + cap,
        "stack_complete_after_return_s": done - back,
        "requests_per_5s_from_outage_start": histogram(agents, out, back),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tasks: list[asyncio.Task[None]] = []
    with swift_control_plane("r09", args.interval, ["--store-signal-poll=2"], front=True) as (_, cp, front):
        assert front is not None
        try:
            connector = aiohttp.TCPConnector(limit=args.agents + 20)
            # The agents' own HTTP client for their store requests, as many connections as agents.
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                Session(args.agents + 20) as store,
            ):
                api = Api(session, cp)
                await wait_ready(api)
                agents = await enrol(api, args.agents)
                names = [a.name for a in agents]
                await api.put_stack(
                    "r09", deployments_template(names, 1, "g1", transport="CFN_SIGNAL"), create=True
                )
                tasks = [asyncio.create_task(a.run(store, args.interval, args.cap)) for a in agents]
                created = await api.wait_stack("r09", timeout=900 + 2 * args.agents)
                results: dict[str, Any] = {"agents": args.agents, "create": created, "outages": []}
                for generation, seconds in enumerate(args.outages, start=2):
                    figures = await outage(api, agents, front, generation, seconds, args, cp.log)
                    brief = {k: v for k, v in figures.items() if not k.startswith("requests_per_5s")}
                    print(json.dumps(brief), flush=True)
                    results["outages"].append(figures)
                await stop(tasks)  # before their HTTP client closes: none of them holds a connection after
                return results
        finally:
            await stop(tasks)


async def stop(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the agents' tasks and wait until they end."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--outages", default="5,60,600", help="outage lengths in seconds, comma-separated")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between an agent's polls")
    p.add_argument("--cap", type=float, default=60.0, help="the agents' back-off cap (backoff_max)")
    args = p.parse_args(argv)
    args.outages = [float(x) for x in str(args.outages).split(",") if x]
    return args


def main() -> None:
    args = parse()
    results = asyncio.run(run(args))
    out = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "results": results,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"r09-{datetime.date.today().isoformat()}.json"
    path.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
