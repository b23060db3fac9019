"""(b) No-change polls per second on one core: the 304 path against the full-document 200 path.

The control plane is pinned to core 0 and the load generator to core 1. The
load generator is wrk (``apt-get install -y wrk``) when installed, else a
Python aiohttp client, which cannot saturate the server: its figures are then a
lower bound, and the report says so.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import (
    Api,
    Server,
    cpu_seconds,
    deployments_template,
    enrol_servers,
    start_plane,
)
from tests.support.controlplane import ControlPlane
from tests.support.processes import stop_process

SERVERS = 100
CONNECTIONS = 64
SERVER_CPU, CLIENT_CPU = 0, 1
WRK_HINT = "apt-get install -y wrk"


async def prepare(cp: ControlPlane) -> tuple[list[Server], dict[str, str], int]:
    """Enrolled servers with one deployment each; their ETags and the size of one full document."""
    async with aiohttp.ClientSession() as http:
        api = Api(http, cp)
        servers = await enrol_servers(api, [f"poll-{i:03d}" for i in range(SERVERS)])
        await api.put_stack("polls", deployments_template([s.name for s in servers], 1, "v1"), create=True)
        await api.wait_stack("polls")
        etags, size = {}, 0
        for s in servers:
            async with http.get(
                f"{cp.url}/v1/agent/document", headers={"Authorization": f"Bearer {s.credential}"}
            ) as resp:
                size = len(await resp.read())
                etags[s.credential] = resp.headers["ETag"]
            async with http.get(
                f"{cp.url}/v1/agent/document",
                headers={"Authorization": f"Bearer {s.credential}", "If-None-Match": etags[s.credential]},
            ) as resp:
                if resp.status != 304:
                    raise SystemExit(f"expected 304 for an unchanged document, got {resp.status}")
        return servers, etags, size


def wrk_script(path: Path, etags: dict[str, str], conditional: bool) -> Path:
    """A wrk Lua script cycling through the agents' credentials (and their ETags)."""

    def lua(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    rows = ",\n".join(f"  {{{lua(c)}, {lua(e)}}}" for c, e in etags.items())
    inm = ', ["If-None-Match"] = a[2]' if conditional else ""
    path.write_text(f"""local agents = {{
{rows}
}}
local i = 0
request = function()
  i = i % #agents + 1
  local a = agents[i]
  return wrk.format(nil, nil, {{["Authorization"] = "Bearer " .. a[1]{inm}}})
end
""")
    return path


def run_wrk(url: str, script: Path, seconds: float) -> dict[str, Any]:
    argv = [
        "taskset",
        "-c",
        str(CLIENT_CPU),
        "wrk",
        "-t1",
        f"-c{CONNECTIONS}",
        f"-d{seconds:g}s",
        "--latency",
        "-s",
        str(script),
        url,
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=True).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE)
    if rps is None:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    return {
        "rps": float(rps.group(1)),
        "bad_status": int(bad.group(1)) if bad else 0,
        "socket_errors": errors.group(0) if errors else "",
        "latency_p99": p99.group(1) if p99 else "",
    }


async def python_load(url: str, etags: dict[str, str], conditional: bool, seconds: float) -> dict[str, Any]:
    """The fallback load generator: CONNECTIONS keep-alive clients in this process, for *seconds*."""
    statuses: Counter[int] = Counter()
    agents = list(etags.items())
    deadline = time.monotonic() + seconds

    async def client(http: aiohttp.ClientSession, offset: int) -> None:
        i = offset
        while time.monotonic() < deadline:
            cred, etag = agents[i % len(agents)]
            headers = {"Authorization": f"Bearer {cred}"}
            if conditional:
                headers["If-None-Match"] = etag
            async with http.get(url, headers=headers) as resp:
                await resp.read()
                statuses[resp.status] += 1
            i += 1

    start = time.monotonic()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONNECTIONS)) as http:
        await asyncio.gather(*(client(http, n) for n in range(CONNECTIONS)))
    elapsed = time.monotonic() - start
    ok = 304 if conditional else 200
    return {
        "rps": sum(statuses.values()) / elapsed,
        "bad_status": sum(n for s, n in statuses.items() if s != ok),
        "socket_errors": "",
        "latency_p99": "",
    }


def load(url: str, etags: dict[str, str], conditional: bool, seconds: float, workdir: Path) -> dict[str, Any]:
    if shutil.which("wrk"):
        name = "conditional.lua" if conditional else "full.lua"
        return run_wrk(url, wrk_script(workdir / name, etags, conditional), seconds)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {CLIENT_CPU})
    try:
        return asyncio.run(python_load(url, etags, conditional, seconds))
    finally:
        os.sched_setaffinity(0, before)


def timed(cp: ControlPlane, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one load, noting how busy the control plane's core was meanwhile."""
    cpu, wall = cpu_seconds(cp.proc.pid), time.monotonic()
    result = run()
    result["server_cpu"] = (cpu_seconds(cp.proc.pid) - cpu) / (time.monotonic() - wall)
    return result


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate, and every run's rate (this machine's noise shows in them)."""
    ordered = sorted(runs, key=lambda r: float(r["rps"]))
    return {**ordered[len(ordered) // 2], "runs_rps": [r["rps"] for r in runs]}


def measure(workdir: Path, seconds: float = 5.0, repeats: int = 3, warmup: float = 2.0) -> dict[str, Any]:
    """Run figure (b) against its own control plane, pinned to one core.

    The 304 and 200 loads alternate, *repeats* times each, so that a slow patch of a
    shared machine hits both; each figure is the median of its runs.
    """
    workdir.mkdir(parents=True)
    if not {SERVER_CPU, CLIENT_CPU} <= os.sched_getaffinity(0):
        raise SystemExit(
            f"figure (b) needs cores {SERVER_CPU} and {CLIENT_CPU}; this process may use "
            f"{sorted(os.sched_getaffinity(0))}"
        )
    if shutil.which("wrk") is None:
        print(
            f"wrk not found: falling back to a Python load generator, which cannot saturate the "
            f"control plane (install wrk with `{WRK_HINT}`)",
            file=sys.stderr,
        )
    cp = start_plane(workdir, cpu=SERVER_CPU)
    runs: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    try:
        _, etags, size = asyncio.run(prepare(cp))
        url = f"{cp.url}/v1/agent/document"
        load(url, etags, True, warmup, workdir)
        for _ in range(repeats):
            for conditional in (True, False):
                runs[conditional].append(timed(cp, partial(load, url, etags, conditional, seconds, workdir)))
    finally:
        stop_process(cp.proc)
    tool = (
        "wrk"
        if shutil.which("wrk")
        else f"python-aiohttp (client-bound lower bound; install wrk: {WRK_HINT})"
    )
    not_modified, full = median_run(runs[True]), median_run(runs[False])
    return {
        "load_generator": tool,
        "connections": CONNECTIONS,
        "servers": SERVERS,
        "seconds": seconds,
        "repeats": repeats,
        "document_bytes": size,
        "not_modified_304": not_modified,
        "full_200": full,
        "ratio": not_modified["rps"] / full["rps"],
    }
