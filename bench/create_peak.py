"""A big create request's peak memory: the body decoded, the template checked and dry-run, the stack stored.

Before the engine's first step, `anneal serve` holds a create's whole request at once: the body's
text, its decoded form, the copy of the template it stores, the parsed definition and the dry
run's values. At a million deployments that request alone peaked at 5.5 GB (bench/scale.py,
2026-11-28, commit 5187123), above the whole create's goal of 4 GB.

For each size and each tree (the baseline's first), a fresh interpreter reads the scale bench's
body (bench/scale_parts.sent: N/5 servers x 5 deployments) as bytes, decodes it as the API
decodes a stack's body and calls ``stacks.create_stack`` on a fresh SQLite database with no
engine running, then prints its VmHWM and VmRSS, wall and CPU seconds. The body is read from a
file the parent wrote, so neither side holds the client's dict. With ``--update`` the same
interpreter then takes the update's request (the scale bench's: rev0=1, a tenth of the deployments
change) with the create's definition cached, as the process that took the create keeps it; its
peak is counted from there (VmHWM reset through /proc/self/clear_refs). The baseline tree runs from
`git archive` of its commit, ahead of this tree on PYTHONPATH (bench/agent_rss.py's way).

Run: `.venv/bin/python -m bench.create_peak --sizes 100000,250000 [--update] [--baseline COMMIT]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.agent_rss import baseline_tree, env_for
from bench.scale_parts import sent

ROOT = Path(__file__).resolve().parents[1]
#: main before the request's template was decoded shared and kept as it came (2026-11-28).
BASELINE = "5187123"

CHILD = """
import asyncio, json, os, sys, time
from pathlib import Path

async def main(body_file, data):
    from control import keys
    from control.api.body import parse_json
    from control.documents.publish import HttpPublisher
    from control.engine.stackdef import Definitions
    from control.provision import EnrolProvisioner
    from control.runtime import Runtime
    from control.services import stacks
    from control.settings import Settings, tune_collector
    from control.store.db import open_database

    tune_collector()
    raw = Path(body_file).read_bytes()
    settings = Settings(data_dir=Path(data), database_url=f"sqlite:///{data}/a.db", provisioner="enrol",
                        max_template_bytes=max(64 * 1024 * 1024, len(raw)))
    secrets = keys.load_or_create(settings.data_dir)
    db, sessions = await open_database(settings.db_url, secrets.data_key)
    rt = Runtime(settings, secrets, sessions, HttpPublisher(), EnrolProvisioner())
    t, c = time.monotonic(), os.times()
    try:
        body = parse_json(raw, shared=True)
    except TypeError:  # a tree from before the shared decode: the API decoded every body whole
        body = parse_json(raw)
    del raw
    defs = Definitions()
    await stacks.create_stack(rt, lambda _: None, body, defs=defs)
    del body
    found = {"create": measured(t, c)}
    if len(sys.argv) > 3:  # then the update's request, the create's definition cached as a server keeps it
        from control.principal import EVERYWHERE
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
        raw = Path(sys.argv[3]).read_bytes()
        t, c = time.monotonic(), os.times()
        try:
            body = parse_json(raw, shared=True)
        except TypeError:
            body = parse_json(raw)
        del raw
        await stacks.update_stack(rt, lambda _: None, "scale", body, within=EVERYWHERE, defs=defs)
        del body
        found["update"] = measured(t, c)
    await db.dispose()
    print(json.dumps(found))

def measured(t, c):
    wall, after = time.monotonic() - t, os.times()
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    kib = {k: int(status[k].split()[0]) for k in ("VmHWM", "VmRSS")}
    cpu = after.user + after.system - c.user - c.system
    return {"seconds": wall, "cpu": cpu, "hwm_mb": kib["VmHWM"] / 1024, "rss_mb": kib["VmRSS"] / 1024}

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def measure(body_file: Path, tree: Path | None, update: Path | None) -> dict[str, Any]:
    """One create request (and with *update*, then an update's) in a fresh interpreter: for each,
    peak and resident MB, seconds and CPU."""
    with tempfile.TemporaryDirectory(prefix="anneal-peak-") as data:
        run = subprocess.run(
            [sys.executable, "-c", CHILD, str(body_file), data, *([str(update)] if update else [])],
            capture_output=True,
            text=True,
            env=env_for(tree),
            timeout=3600,
            cwd="/",  # not this tree: the baseline must come first on the path
            check=False,
        )
    if run.returncode != 0:
        raise RuntimeError(f"the create request failed ({run.returncode}): {run.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(run.stdout.splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,250000")
    parser.add_argument(
        "--baseline", default=BASELINE, help="the commit compared with this tree ('' for this tree alone)"
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="then an update's request (rev0=1: 10 %% change), peak from there",
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"create request peak {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, nproc {os.cpu_count()}, "
        f"load {load:.2f}; baseline {args.baseline}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="anneal-peak-bench-") as tmp:
        where = Path(tmp)
        base = baseline_tree(where, args.baseline, ("control", "agent", "hooks")) if args.baseline else None
        for n in (int(s) for s in args.sizes.split(",")):
            body_file, update_file = where / f"body-{n}.json", where / f"update-{n}.json"
            body_file.write_bytes(sent(n, name="scale"))
            if args.update:
                update_file.write_bytes(sent(n, parameters={"rev0": 1}))
            mb = body_file.stat().st_size / 1e6
            wanted = update_file if args.update else None
            old = measure(body_file, base, wanted) if base else None
            new = measure(body_file, None, wanted)
            body_file.unlink()
            update_file.unlink(missing_ok=True)
            for request in new:
                report(n, mb, request, None if old is None else old[request], new[request])


def report(n: int, mb: float, request: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
    """A line per tree, then their ratios."""
    for label, r in (("baseline", old), ("this tree", new)):
        if r is not None:
            print(
                f"{n:>9} deployments ({mb:6.1f} MB body), {request} {label:9s}: peak {r['hwm_mb']:8.1f} MB "
                f"({r['hwm_mb'] * 1024 / n:5.2f} KB a deployment), resident after {r['rss_mb']:8.1f} MB, "
                f"{r['seconds']:6.1f} s, CPU {r['cpu']:6.1f} s",
                flush=True,
            )
    if old is not None:
        print(
            f"{n:>9} {request} this tree / baseline: peak {new['hwm_mb'] / old['hwm_mb']:.2f}x, "
            f"resident after {new['rss_mb'] / old['rss_mb']:.2f}x, CPU {new['cpu'] / old['cpu']:.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
