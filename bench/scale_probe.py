"""Is a big stack usable: how long each read a user makes of it takes, through the real HTTP API.

Run by bench/scale.py --probe in its child, after the create settled and before the update: the
child serves the real API (control.api.app.api_app, as `anneal serve`) on a loopback port and
times each request below from send to the last byte of its answer (median of ROUNDS, one when
slower than SLOW, each bounded by LIMIT seconds). The requests are the ones the CLI and the web
view make: `anneal stack show` (GET /v1/stacks/NAME?resources_limit=100), `anneal stack resources
--limit`, `anneal deployment list --stack --limit` (GET /v1/deployments?stack=&limit=), `anneal
stack events --limit` (GET .../events?limit=), the web view's stack page (its graph, the first and
the last page of resources, a page of events); up to UNPAGED deployments, for comparison, the
unpaged answers too (past it they take minutes and their gigabyte answers would be the peak RSS).

On its own (`python -m bench.scale_probe --db-url URL --data-dir DIR --deployments N`) it serves
the API of an existing control plane's database and data dir from this process, with no engine
running here, and probes its stack: the reads of a cold process while the other one works.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

ROUNDS = 3
LIMIT = 60.0
#: A request slower than this is timed once, not ROUNDS times.
SLOW = 5.0
PER_PAGE = 100
UNPAGED = 100_000


def requests(name: str, deployments: int, servers: int) -> list[tuple[str, str, bool]]:
    """(what, path, through the web view's session) for a stack of *deployments*."""
    last = (deployments + servers + PER_PAGE - 1) // PER_PAGE
    half = (deployments + servers) // 2  # a resource id in the middle (ids count from 1 in a fresh database)
    return [
        ("stack show (summary)", f"/v1/stacks/{name}?summary=true&progress=true", False),
        ("stack show (CLI: the first 100 resources)", f"/v1/stacks/{name}?resources_limit={PER_PAGE}", False),
        ("stack show, every resource (unpaged)", f"/v1/stacks/{name}", False),
        (
            "stack resources, a middle page",
            f"/v1/stacks/{name}/resources?limit={PER_PAGE}&after={half}",
            False,
        ),
        ("deployment list --stack, first page", f"/v1/deployments?stack={name}&limit={PER_PAGE}", False),
        (
            "deployment list --stack, a middle page",
            f"/v1/deployments?stack={name}&limit={PER_PAGE}&after=8",
            False,
        ),
        ("deployment list --stack, every one (unpaged)", f"/v1/deployments?stack={name}", False),
        ("events, first page", f"/v1/stacks/{name}/events?limit={PER_PAGE}", False),
        ("events, a later page", f"/v1/stacks/{name}/events?limit={PER_PAGE}&after={deployments}", False),
        ("web view: stack list", "/ui/api/stacks", True),
        ("web view: graph", f"/ui/api/stacks/{name}/graph", True),
        (
            "web view: first page of resources",
            f"/ui/api/stacks/{name}/resources?page=1&per_page={PER_PAGE}",
            True,
        ),
        (
            f"web view: page {last} of resources",
            f"/ui/api/stacks/{name}/resources?page={last}&per_page={PER_PAGE}",
            True,
        ),
        ("web view: events", f"/ui/api/stacks/{name}/events?limit={PER_PAGE}", True),
    ]


async def probe(
    url: str, token: str, name: str, deployments: int, servers: int, unpaged: int = UNPAGED
) -> list[dict[str, Any]]:
    """Each request's median seconds, answer size and HTTP status (a 4xx: the API has no such paging)."""
    import aiohttp  # noqa: PLC0415 (the child's imports)

    found = []
    timeout = aiohttp.ClientTimeout(total=LIMIT)
    # unsafe: the jar keeps the web view's session cookie for an IP address (127.0.0.1).
    async with aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.CookieJar(unsafe=True)) as ui:
        async with ui.post(url + "/ui/login", data={"token": token}) as answer:
            await answer.read()
        async with aiohttp.ClientSession(
            timeout=timeout, headers={"Authorization": f"Bearer {token}"}
        ) as api:
            for what, path, in_ui in requests(name, deployments, servers):
                if "(unpaged)" in what and deployments > unpaged:
                    continue
                found.append(await median_get(ui if in_ui else api, url + path, what))
    return found


async def median_get(client: Any, url: str, what: str) -> dict[str, Any]:
    """ROUNDS timed GETs of *url*; stops at the first that fails or runs past LIMIT."""
    times: list[float] = []
    size, status = 0, 0
    for _ in range(ROUNDS):
        began = time.monotonic()
        try:
            async with client.get(url) as answer:
                size, status = len(await answer.read()), answer.status
        except TimeoutError:
            return {"what": what, "seconds": None, "bytes": size, "status": f"over {LIMIT:.0f} s"}
        times.append(time.monotonic() - began)
        if status >= 400 or times[-1] > SLOW:
            break
    return {"what": what, "seconds": statistics.median(times), "bytes": size, "status": status}


def report(rows: list[dict[str, Any]], deployments: int) -> None:
    """One line per request."""
    for r in rows:
        took = f"{r['seconds']:8.3f} s" if r["seconds"] is not None else "     n/a"
        print(
            f"  usable at {deployments}: {r['what']:<40} {took}  {r['bytes']:>12} bytes  HTTP {r['status']}"
        )


async def _against(
    db_url: str, data_dir: Path, name: str, deployments: int, unpaged: int
) -> list[dict[str, Any]]:
    """Serve the API of the control plane whose data dir and database are given (no engine runs
    here: nothing is claimed or changed) and probe its stack *name*."""
    from bench.scale_parts import FrontDoor  # noqa: PLC0415 (after sys.path is set)
    from control import keys  # noqa: PLC0415
    from control.documents.publish import HttpPublisher  # noqa: PLC0415
    from control.engine.stackdef import Definitions  # noqa: PLC0415
    from control.engine.worker import Engine  # noqa: PLC0415
    from control.provision import EnrolProvisioner  # noqa: PLC0415
    from control.runtime import Runtime  # noqa: PLC0415
    from control.settings import Settings  # noqa: PLC0415
    from control.store.db import open_database  # noqa: PLC0415

    settings = Settings(data_dir=data_dir, database_url=db_url, provisioner="enrol")
    secrets = keys.load_or_create(data_dir)
    db, sessions = await open_database(settings.db_url, secrets.data_key)
    rt = Runtime(settings, secrets, sessions, HttpPublisher(), EnrolProvisioner())
    defs = Definitions()
    front = await FrontDoor.open(settings, rt, Engine(rt, defs), defs, deployments, write=False)
    try:
        return await probe(front.url, secrets.admin_token, name, deployments, deployments // 5, unpaged)
    finally:
        await front.close()
        await db.dispose()


def main() -> int:
    """`python -m bench.scale_probe --db-url URL --data-dir DIR --deployments N [--stack scale]`."""
    p = argparse.ArgumentParser(description="time a user's reads of a stack of an existing control plane")
    p.add_argument("--db-url", required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--deployments", type=int, required=True)
    p.add_argument("--stack", default="scale")
    p.add_argument(
        "--unpaged",
        type=int,
        default=0,
        help="also the unpaged reads up to this many deployments (default none)",
    )
    args = p.parse_args()
    print(f"probe {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}")
    report(
        asyncio.run(_against(args.db_url, args.data_dir, args.stack, args.deployments, args.unpaged)),
        args.deployments,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
