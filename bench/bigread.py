"""Reads of a big stack at two sizes, this tree against a baseline commit's, in the same run (issue 20).

For each size and each tree (the baseline's first): `anneal serve` on a fresh database (PostgreSQL
by default: a throw-away cluster from tests/support/pg.py), a stack of N resources created through
the API (one OS::Heat::Value that the others need: nine in ten OS::Heat::None, one in ten
OS::Heat::Value reading it; with --outputs, one output), then what a user reads of it, each timed from send to
the last byte of the answer (median of bench.scale_probe.ROUNDS): `stack show` as the CLI asks it
(the first 100 resources and the outputs), its summary with the progress counts, events (first,
middle and newest page), the web view's stack list, graph, first and last page of resources and
one type's page, and with Debian's chromium the stack page until its graph is at rest. Each is
read twice: in the process that created the stack (its definition parsed), and after a restart
(cold, as another process of a several-process control plane reads it). The baseline tree runs
from `git archive` of its commit, ahead of this tree on PYTHONPATH (bench/agent_rss.py's way).

Run: `.venv/bin/python -m bench.bigread --sizes 10000,100000 [--db sqlite] [--baseline COMMIT]
[--this COMMIT] [--outputs]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.agent_rss import env_for
from bench.harness import start_plane
from bench.scale_probe import median_get
from bench.ui_scale import browser_seconds
from tests.support.browser import chromium
from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.pg import running_postgres

#: main's commit when issue 20's reads work started (2026-11-26 18:58 UTC).
BASELINE = "75ee70f"
NAME = "wide"
PER_PAGE = 100
ROOT = Path(__file__).resolve().parent.parent


def template(resources: int, outputs: bool) -> str:
    """One value, *resources* - 1 resources needing it (one in ten a value reading it); with
    *outputs*, one output reading the value."""
    lines = [
        "heat_template_version: 2018-08-31",
        "resources:",
        "  v: {type: OS::Heat::Value, properties: {value: a}}",
    ]
    for i in range(resources - 1):
        if i % 10 == 9:
            lines.append(
                f"  n{i}: {{type: OS::Heat::Value, properties: {{value: {{get_attr: [v, value]}}}}}}"
            )
        else:
            lines.append(f"  n{i}: {{type: OS::Heat::None, depends_on: v}}")
    if outputs:
        lines += ["outputs:", "  o: {value: {get_attr: [v, value]}}"]
    return "\n".join(lines) + "\n"


def reads(resources: int) -> list[tuple[str, str, bool]]:
    """(what, path, through the web view's session) of the stack of *resources*."""
    last = (resources + PER_PAGE - 1) // PER_PAGE
    base, ui = f"/v1/stacks/{NAME}", f"/ui/api/stacks/{NAME}"
    return [
        ("stack show (CLI: 100 resources, outputs)", f"{base}?resources_limit={PER_PAGE}", False),
        ("stack show summary, progress counts", f"{base}?summary=true&progress=true", False),
        ("events, first page", f"{base}/events?limit={PER_PAGE}", False),
        ("events, a middle page", f"{base}/events?limit={PER_PAGE}&after={resources}", False),
        ("events, newest page (baseline: oldest)", f"{base}/events?limit={PER_PAGE}&newest=true", False),
        ("web view: stack list", "/ui/api/stacks", True),
        ("web view: graph", f"{ui}/graph", True),
        ("web view: first page of resources", f"{ui}/resources?page=1&per_page={PER_PAGE}", True),
        (f"web view: page {last} of resources", f"{ui}/resources?page={last}&per_page={PER_PAGE}", True),
        (
            "web view: the page after a middle id (baseline: page 2)",
            f"{ui}/resources?page=2&per_page={PER_PAGE}&after={resources // 2}",
            True,
        ),
        (
            "web view: page 2 of one type",
            f"{ui}/resources?page=2&per_page={PER_PAGE}&type=OS::Heat::Value",
            True,
        ),
        ("web view: newest events", f"{ui}/events?limit=200&newest=true", True),
    ]


async def probe(cp: ControlPlane, resources: int) -> dict[str, float | None]:
    """What -> median seconds (None: past scale_probe.LIMIT) of every read."""
    import aiohttp  # noqa: PLC0415 (the bench's own client)

    timeout = aiohttp.ClientTimeout(total=120)
    found: dict[str, float | None] = {}
    async with aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.CookieJar(unsafe=True)) as ui:
        async with ui.post(cp.url + "/ui/login", data={"token": cp.token}) as answer:
            await answer.read()
        headers = {"Authorization": f"Bearer {cp.token}"}
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as api:
            for what, path, in_ui in reads(resources):
                found[what] = (await median_get(ui if in_ui else api, cp.url + path, what))["seconds"]
    return found


def settle(cp: ControlPlane, limit: float) -> str:
    """Wait for the stack to leave IN_PROGRESS, reading its summary only (bounded by *limit* seconds)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        status = str(cp.api("GET", f"/v1/stacks/{NAME}?summary=true").body["status"])
        if not status.endswith("IN_PROGRESS"):
            return status
        time.sleep(2)
    raise SystemExit(f"stack still in progress after {limit:.0f} s: {cp.log}")


def one_tree(
    work: Path, tree: Path | None, db: str, resources: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Create the stack with *tree*'s control plane (None: this one), read it warm, restart, read it cold."""
    extra = ["--provisioner", "enrol", "--max-template-bytes", "64M", *(["--db", db] if db else [])]
    env = env_for(tree)
    cp = start_plane(work, extra=extra, env=env)
    try:
        began = time.monotonic()
        created = cp.create(NAME, template(resources, args.outputs))
        if created.status != 201:
            raise SystemExit(f"create refused: {created.body}")
        status = settle(cp, args.timeout)
        took = time.monotonic() - began
        warm = asyncio.run(probe(cp, resources))
    finally:
        stop_control_plane(cp)
    cp = start_plane(work, extra=extra, env=env, port=cp.port)
    try:
        cold = asyncio.run(probe(cp, resources))
        binary = chromium()
        page = asyncio.run(browser_seconds(cp, binary, work / "profile"))[0] if binary else None
    finally:
        stop_control_plane(cp)
    return {"create": took, "status": status, "warm": warm, "cold": cold, "browser": page}


@contextlib.contextmanager
def databases(kind: str) -> Iterator[Any]:
    """A function giving a fresh database URL per control plane ("" for SQLite in its data dir)."""
    if kind == "sqlite":
        yield lambda: ""
        return
    with running_postgres() as pg:
        yield pg.new_database


def baseline_tree(commit: str, into: Path) -> Path:
    """*commit*'s tree, unpacked (`git archive`), with this tree's .venv beside it."""
    tree = into / f"tree-{commit}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    (tree / ".venv").symlink_to(ROOT / ".venv")
    return tree


def report(size: int, base: dict[str, Any], this: dict[str, Any]) -> None:
    """One line per read: the baseline's seconds, this tree's, and the ratio, warm then cold."""
    load = os.getloadavg()[0]
    print(
        f"\n{size} resources (load {load:.1f}): created in {base['create']:.1f} s (baseline,"
        f" {base['status']}) and {this['create']:.1f} s (this tree, {this['status']})"
    )
    print(f"  {'read':<56} {'baseline':>9} {'this':>9} {'ratio':>7}   cold: {'baseline':>9} {'this':>9}")
    for what in this["warm"]:
        cells = [base["warm"][what], this["warm"][what]]
        cold = [base["cold"][what], this["cold"][what]]
        ratio = f"{cells[1] / cells[0]:6.2f}x" if None not in cells and cells[0] else "    n/a"
        shown = " ".join(f"{c:8.3f}s" if c is not None else "   >limit" for c in cells)
        cold_shown = " ".join(f"{c:8.3f}s" if c is not None else "   >limit" for c in cold)
        print(f"  {what:<56} {shown} {ratio}   cold: {cold_shown}")
    if this["browser"] is not None:
        print(
            f"  {'chromium: stack page to graph at rest':<56} {base['browser']:8.3f}s {this['browser']:8.3f}s"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    p.add_argument("--baseline", default=BASELINE, help=f"the commit to compare with (default {BASELINE})")
    p.add_argument("--timeout", type=float, default=3600.0, help="longest a create may take (s)")
    p.add_argument("--outputs", action="store_true", help="the stack has an output (stack show resolves it)")
    p.add_argument("--this", default="", help="run this commit's tree instead of the work tree (a snapshot)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-bigread-"))
    tree = baseline_tree(args.baseline, work)
    this = baseline_tree(args.this, work) if args.this else None
    print(
        f"bigread {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f},"
        f" {args.db}, baseline {args.baseline}, this {args.this or 'work tree'}, outputs {args.outputs};"
        f" work dir {work}"
    )
    with databases(args.db) as new_db:
        for size in (int(s) for s in args.sizes.split(",")):
            found = {}
            for label, code in (("baseline", tree), ("this", this)):
                (work / f"{size}-{label}").mkdir()
                found[label] = one_tree(work / f"{size}-{label}", code, new_db(), size, args)
            report(size, found["baseline"], found["this"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
