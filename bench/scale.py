"""Scale: one stack of N deployments (N/5 servers x 5), create, update 10 %, delete.

    .venv/bin/python bench/scale.py                       # growth curve 1k..50k on SQLite and PostgreSQL
    .venv/bin/python bench/scale.py --sizes 50000 --db sqlite --timeout 1200
    .venv/bin/python bench/scale.py --sizes 1000,5000 --baseline-tree /tmp/prev   # and the previous code

Baselines printed in the same run: Heat's best public figure (about 2,000 resources per minute,
a constant: Heat does not run here), and with ``--baseline-tree`` the previous implementation run
on the same sizes (a source tree of an older commit, ``git archive C | tar -x -C /tmp/prev``). Every size is bounded by ``--timeout`` seconds;
a size that runs past it is reported and the larger ones are skipped.

The control plane runs in this process (Runtime + Engine + the durable work loop,
exactly as `anneal serve` builds them, without the HTTP listener). Simulated
agents see each server's document the moment the publisher gets it (the signed
bytes `runtime.publish` hands over), and signal every new generation at once by
calling `control.services.agents.record_signal`: the same function `POST /v1/signal/...`
calls, with the CFN_SIGNAL URL's signature checked as over HTTP. The HTTP layer
itself (aiohttp, 12,000+ small requests/s on one core: docs/performance.md (b))
is left out so the figure is the engine's and the database's.

With ``--api`` the stack goes through the front door instead: the child also serves the real
HTTP API (control.api.app.api_app, as `anneal serve` with ``--max-template-bytes 64M``) on a
loopback port, and each phase is the real CLI in a subprocess (``anneal stack create scale -t
scale.json --wait``, ``stack update ... -P rev0=1 --wait``, ``stack delete --wait``), timed
from start to exit, reading and sending the template and printing every event included.

Each line also gives the child's CPU time per deployment created (load disturbs it much less
than the wall-clock rate), the engine steps and the signal transactions. Each size runs in its
own child, so peak RSS (VmHWM, simulated agents included) is that size's. PostgreSQL: a
throw-away cluster (tests/support/pg.py, `fsync=off`), one database per size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import scale_locks, scale_parts, scale_probe  # noqa: E402
from bench.scale_agents import SimAgents  # noqa: E402
from bench.scale_parts import (  # noqa: E402 (after the path is set)
    PER_SERVER,
    FrontDoor,
    cpu,
    hwm_mb,
    new_generations,
    progress,
    received,
    sent,
)
from bench.scale_report import HEAT_PER_MIN, compare_shapes, report  # noqa: E402

WORKERS = 512


async def child(
    deployments: int, db_url: str, data_dir: Path, api: bool = False, probe: bool = False
) -> dict[str, Any]:
    from control import keys  # noqa: PLC0415 (the child's imports)
    from control.documents.publish import HttpPublisher  # noqa: PLC0415
    from control.engine.stackdef import Definitions  # noqa: PLC0415
    from control.engine.worker import Engine  # noqa: PLC0415
    from control.principal import EVERYWHERE  # noqa: PLC0415
    from control.provision import EnrolProvisioner  # noqa: PLC0415
    from control.runtime import Runtime  # noqa: PLC0415
    from control.services import agents, stacks  # noqa: PLC0415
    from control.settings import Settings, tune_collector  # noqa: PLC0415

    tune_collector()  # as `anneal serve` does
    scale_parts.trace_memory()  # SCALE_TRACEMALLOC
    from control.store.db import open_database  # noqa: PLC0415
    from control.store.orm import StackRow  # noqa: PLC0415

    seen: set[tuple[str, int]] = set()
    sim: SimAgents | None = None  # the simulated agents, once the runtime they signal exists

    class SimPublisher(HttpPublisher):
        """The HTTP publisher, plus simulated agents that read each document as it is published."""

        async def publish(self, server_id: str, serial: int, body: bytes, at: float | None = None) -> None:
            await super().publish(server_id, serial, body, at)
            for found in new_generations(body, seen):
                assert sim is not None
                sim.put(found)

    settings = Settings(
        data_dir=data_dir,
        database_url=db_url,
        provisioner="enrol",
        default_signal_transport="CFN_SIGNAL",
        max_template_bytes=scale_parts.template_cap(deployments),  # in-process too: the evaluation budget
        **scale_parts.overrides(),  # SCALE_STEP_SLICE
    )
    secrets = keys.load_or_create(settings.data_dir)
    db, sessions = await open_database(settings.db_url, secrets.data_key)
    locks = scale_locks.watch(db.sync_engine)  # SCALE_LOCKS=1, SCALE_BUSY_MS
    rt = Runtime(settings, secrets, sessions, SimPublisher(), EnrolProvisioner())
    defs = Definitions()
    engine = Engine(rt, defs)
    steps = {"n": 0, "seconds": 0.0, "max": 0.0}
    real_step = engine.step

    async def timed_step(claim: Any) -> Any:
        t = time.monotonic()
        try:
            return await real_step(claim)
        finally:
            d = time.monotonic() - t
            steps["n"] += 1
            steps["seconds"] += d
            steps["max"] = max(steps["max"], d)
            if os.environ.get("SCALE_TRACE"):
                print(f"step {d:.2f}s", file=sys.stderr, flush=True)

    engine.step = timed_step  # type: ignore[method-assign]
    real_batch: Any = getattr(engine, "step_batch", None)  # the previous implementation has no batches

    async def timed_batch(claims: Any) -> Any:
        t = time.monotonic()
        try:
            return await real_batch(claims)
        finally:
            steps["batches"] = steps.get("batches", 0) + 1
            steps["batched_stacks"] = steps.get("batched_stacks", 0) + len(claims)
            steps["seconds"] += time.monotonic() - t

    if real_batch is not None:
        engine.step_batch = timed_batch  # type: ignore[method-assign]
    await engine.resume()

    async def signal(dep_id: str, gen: int, sig: str) -> Any:
        body = {"deploy_status_code": 0, "deploy_stdout": "ok", "deploy_stderr": ""}
        return await agents.record_signal(rt, engine.kick, dep_id, gen, body, sig=sig, server_id=None)

    sim = SimAgents(signal, WORKERS)  # refused signals are sent again as the agent does (scale_agents)
    signalled = sim.counts

    async def wait_settled(name: str, timeout: float = 4 * 3600) -> str:
        """The stack's state once it settles (the parent's --timeout bounds the whole size; one hour
        here cut a million's create short: it ran 73 minutes)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            async with sessions() as session:
                from sqlalchemy import select  # noqa: PLC0415

                row = (
                    await session.execute(
                        select(StackRow.action, StackRow.status).where(StackRow.name == name)
                    )
                ).first()
            if row is None:
                return "DELETED"
            if row[1] != "IN_PROGRESS":
                return f"{row[0]}_{row[1]}"
            await asyncio.sleep(0.2)
        return "TIMEOUT"

    phases: dict[str, Any] = {}
    if api:
        front = await FrontDoor.open(settings, rt, engine, defs, deployments)
        phases["create"] = await front.run(1, "stack", "create", "scale", "-t", str(front.template), "--wait")
        phases["create"].update(
            status=await wait_settled("scale"),
            signals=signalled["signalled"],
            agents=sim.phase(),
            peak_rss_mb=hwm_mb(),
        )
        before = signalled["signalled"]
        phases["update10"] = await front.run(
            2, "stack", "update", "scale", "-t", str(front.template), "-P", "rev0=1", "--wait"
        )
        phases["update10"].update(
            status=await wait_settled("scale"),
            signals=signalled["signalled"] - before,
            agents=sim.phase(),
            peak_rss_mb=hwm_mb(),
        )
        phases["delete"] = await front.run(3, "stack", "delete", "scale", "--wait")
        phases["delete"].update(status=await wait_settled("scale"), agents=sim.phase(), peak_rss_mb=hwm_mb())
        await front.close()
    else:
        # The client is another process: its JSON is built before the clock starts, a resource at a
        # time (its dict of a million deployments would be 1.5 GB of this child's peak), decoded by
        # the create as `anneal serve` decodes it, and not kept once the create returns.
        wire = [sent(deployments, name="scale")]
        t0, c0 = time.monotonic(), cpu()
        # defs: as the API of `anneal serve` passes its engine's (the definition it validated is kept).
        await stacks.create_stack(rt, engine.kick, received(wire.pop()), defs=defs)
        phases["create"] = {
            "status": await wait_settled("scale"),
            "seconds": time.monotonic() - t0,
            "cpu": cpu() - c0,
            "signals": signalled["signalled"],
            "agents": sim.phase(),
            "peak_rss_mb": hwm_mb(),
        }
        progress(deployments, "create", phases["create"])
        if probe:  # the stack settled and whole: how long a user's reads of it take
            front = await FrontDoor.open(settings, rt, engine, defs, deployments, write=False)
            usable = await scale_probe.probe(
                front.url, rt.keys.admin_token, "scale", deployments, deployments // PER_SERVER
            )
            await front.close()
        before = signalled["signalled"]
        wire = [sent(deployments, parameters={"rev0": 1})]
        t0, c0 = time.monotonic(), cpu()
        await stacks.update_stack(
            rt,
            engine.kick,
            "scale",
            received(wire.pop()),
            within=EVERYWHERE,
            defs=defs,
        )
        phases["update10"] = {
            "status": await wait_settled("scale"),
            "seconds": time.monotonic() - t0,
            "cpu": cpu() - c0,
            "signals": signalled["signalled"] - before,
            "agents": sim.phase(),
            "peak_rss_mb": hwm_mb(),
        }
        progress(deployments, "update10", phases["update10"])
        t0, c0 = time.monotonic(), cpu()
        await stacks.delete_stack(rt, engine.kick, "scale", within=EVERYWHERE)
        phases["delete"] = {
            "status": await wait_settled("scale"),
            "seconds": time.monotonic() - t0,
            "cpu": cpu() - c0,
            "agents": sim.phase(),
            "peak_rss_mb": hwm_mb(),
        }
        progress(deployments, "delete", phases["delete"])
    await sim.close()
    await engine.close()
    await db.dispose()
    batch = getattr(rt, "signal_batch", None)  # the previous implementation has no signal batches
    return {
        "deployments": deployments,
        "servers": deployments // PER_SERVER,
        "phases": phases,
        "peak_rss_mb": hwm_mb(),
        "signal_errors": signalled["final"] + signalled["gave_up"],
        "agents": {**sim.counts, "pending": sim.pending(), "reasons": dict(sim.reasons)},
        **({"locks": locks.report()} if locks else {}),
        "steps": steps,
        "signal_transactions": getattr(batch, "batches", None),
        **({"usable": usable} if probe and not api else {}),
    }


def run_child(
    deployments: int, db_url: str, timeout: float, tree: Path = ROOT, api: bool = False, probe: bool = False
) -> dict[str, Any] | None:
    """One size in a child process (its own peak RSS); None when it ran past *timeout* seconds."""
    with tempfile.TemporaryDirectory(prefix="anneal-scale-") as tmp:
        try:
            out = subprocess.run(
                [
                    sys.executable,
                    str(tree / "bench" / "scale.py"),
                    "--child",
                    str(deployments),
                    "--db-url",
                    db_url or f"sqlite:///{tmp}/a.db",
                    "--data-dir",
                    tmp,
                    *(["--api"] if api else []),
                    *(["--probe"] if probe else []),
                ],
                stdout=subprocess.PIPE,  # stderr passes through: each phase's progress line
                text=True,
                timeout=timeout,
                check=False,
                cwd=tree,
            )
        except subprocess.TimeoutExpired:
            return None
    if out.returncode != 0:
        raise SystemExit(f"child for {deployments} failed (its stderr above)")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,5000,10000,25000,50000")
    p.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    p.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="seconds one size may take (create + update + delete); larger sizes are skipped after",
    )
    p.add_argument(
        "--baseline-tree",
        type=Path,
        help="also run the previous implementation from this source tree (e.g. "
        "`git archive 34e9095 | tar -x -C DIR`) for sizes up to --baseline-max",
    )
    p.add_argument("--baseline-max", type=int, default=5000)
    p.add_argument(
        "--api",
        action="store_true",
        help="through the front door: the real HTTP API and the real CLI (`stack create --wait`)",
    )
    p.add_argument(
        "--groups",
        action="store_true",
        help="the deployments as ten SoftwareDeploymentGroups of N/10 members instead of resources",
    )
    p.add_argument(
        "--nested",
        action="store_true",
        help="the deployments as two ResourceGroups of nested stacks (a server and 5 deployments each)",
    )
    p.add_argument(
        "--shapes",
        help="several shapes one after the other in this run, e.g. flat,nested (each compared with flat)",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="after each create, time a user's reads of the stack (scale_probe)",
    )
    p.add_argument("--child", type=int)
    p.add_argument("--db-url", default="")
    p.add_argument("--data-dir", type=Path)
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    if args.child:
        import logging  # noqa: PLC0415

        logging.basicConfig(level=logging.WARNING)
        run = child(args.child, args.db_url, args.data_dir, args.api, args.probe)  # SCALE_PROFILE:
        print(json.dumps(scale_parts.profiled(lambda: asyncio.run(run))))
        return 0
    if args.api and args.nested:
        p.error("--nested goes through the engine only: the CLI would need member.yaml beside the template")
    shapes = (args.shapes or ("groups" if args.groups else "nested" if args.nested else "flat")).split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    print(
        f"scale bench {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, nproc {os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.2f}; baseline: Heat's best public figure, {HEAT_PER_MIN} resources/min"
        + (f", and the previous implementation in {args.baseline_tree}" if args.baseline_tree else "")
    )
    results = []
    for backend in backends:
        pg_ctx = None
        if backend == "postgresql":
            from tests.support.pg import running_postgres  # noqa: PLC0415

            pg_ctx = running_postgres()
            pg = pg_ctx.__enter__()
        try:
            trees = [("", ROOT)]
            if args.baseline_tree:
                trees.append(("previous ", args.baseline_tree.resolve()))
            for shape, (prefix, tree) in ((sh, t) for sh in shapes for t in trees):
                os.environ["SCALE_SHAPE"] = shape  # the children build their template from it
                base: dict[str, float] = {}
                for n in sizes:
                    if prefix and n > args.baseline_max:
                        continue
                    url = pg.new_database() if backend == "postgresql" else ""
                    started = time.monotonic()
                    r = run_child(
                        n, url, args.timeout, tree, args.api and not prefix, args.probe and not prefix
                    )
                    label = f"{prefix}{backend}{' API+CLI' if args.api and not prefix else ''}{'' if shape == 'flat' else ' ' + shape}"
                    report(label, n, r, base)
                    if r is not None and "usable" in r:
                        scale_probe.report(r["usable"], n)
                    if r is None:
                        break
                    r.update(
                        db=backend,
                        implementation=prefix.strip() or "this",
                        shape=shape,
                        load=os.getloadavg()[0],
                        wall=time.monotonic() - started,
                    )
                    results.append(r)
        finally:
            if pg_ctx is not None:
                pg_ctx.__exit__(None, None, None)
    compare_shapes(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
