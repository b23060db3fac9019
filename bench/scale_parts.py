"""What bench/scale.py runs: its stacks, the simulated agents' reading of documents, the front door.

The stack is N deployments (N/5 servers x 5) in the shape SCALE_SHAPE names (set by scale.py's
--groups / --nested for its children): each deployment its own resource (default), ten
SoftwareDeploymentGroups, or ResourceGroups of nested server templates. In every shape the
update of ``rev0`` re-runs 10 %. With --api the phases go through ``FrontDoor``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import sys
import time
import tracemalloc
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
PER_SERVER = 5
ROOT = Path(__file__).resolve().parents[1]


def template_cap(deployments: int) -> int:
    """`--max-template-bytes` as an operator of a stack this big sets it: the template of 50,000
    deployments is 12 MB of JSON (250 B each), and the evaluation budget follows the cap (128
    times it: a million's template builds more than the default 64 MB in its dry run)."""
    return max(64 * 1024 * 1024, 512 * deployments)


def overrides() -> dict[str, Any]:
    """Settings of a scale.py child: no stack timeout (a million deployments may take longer than
    `anneal serve`'s default hour: the bench measures how long, it does not cut it), and from the
    environment SCALE_STEP_SLICE=N as `--step-slice N`."""
    value = os.environ.get("SCALE_STEP_SLICE")
    return {"stack_timeout": 0} | ({} if value is None else {"step_slice": int(value)})


def profiled(run: Callable[[], T]) -> T:
    """*run* under cProfile when SCALE_PROFILE names a file prefix (stats in PREFIX.<pid>.prof)."""
    prefix = os.environ.get("SCALE_PROFILE")
    if not prefix:
        return run()
    import cProfile  # noqa: PLC0415

    profile = cProfile.Profile()
    try:
        return profile.runcall(run)
    finally:
        profile.dump_stats(f"{prefix}.{os.getpid()}.prof")


def template(deployments: int) -> dict[str, Any]:
    """The stack: each deployment its own resource, or with --groups (SCALE_SHAPE=groups) in groups,
    or with --nested (SCALE_SHAPE=nested) in nested stacks."""
    if os.environ.get("SCALE_SHAPE") == "groups":
        return group_template(deployments)
    if os.environ.get("SCALE_SHAPE") == "nested":
        return nested_template(deployments)
    resources = _config_and_servers(deployments)
    for i in range(deployments):
        resources[f"d{i}"] = _deployment(i)
    params = {f"rev{k}": {"type": "number", "default": 0} for k in range(10)}
    return {"heat_template_version": "2018-08-31", "parameters": params, "resources": resources}


def _deployment(i: int) -> dict[str, Any]:
    return {
        "type": "OS::Heat::SoftwareDeployment",
        "properties": {
            "config": {"get_resource": "cfg"},
            "server": {"get_resource": f"srv{i // PER_SERVER}"},
            "input_values": {"REV": {"get_param": f"rev{i % 10}"}},
            "signal_transport": "CFN_SIGNAL",
        },
    }


def _server(s: int) -> dict[str, Any]:
    return {"type": "OS::Heat::DeployedServer", "properties": {"name": f"scale-{s}"}}


def _config_and_servers(deployments: int) -> dict[str, Any]:
    """The resources both shapes share: the config and N/5 servers."""
    resources: dict[str, Any] = {
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "config": "true", "inputs": [{"name": "REV"}]},
        }
    }
    for s in range(max(1, deployments // PER_SERVER)):
        resources[f"srv{s}"] = _server(s)
    return resources


def group_template(deployments: int) -> dict[str, Any]:
    """The same deployments as ten SoftwareDeploymentGroups of N/10 members (no batching).

    Group k covers the servers of k's parity, so each server still runs five
    deployments, and group k's input is rev<k>: the update of rev0 re-runs 10 %.
    """
    servers = max(1, deployments // PER_SERVER)
    resources = _config_and_servers(deployments)
    for k in range(10):
        resources[f"g{k}"] = {
            "type": "OS::Heat::SoftwareDeploymentGroup",
            "properties": {
                "config": {"get_resource": "cfg"},
                "servers": {f"s{s}": {"get_resource": f"srv{s}"} for s in range(k % 2, servers, 2)},
                "input_values": {"REV": {"get_param": f"rev{k}"}},
                "signal_transport": "CFN_SIGNAL",
            },
        }
    params = {f"rev{k}": {"type": "number", "default": 0} for k in range(10)}
    return {"heat_template_version": "2018-08-31", "parameters": params, "resources": resources}


#: --nested: one member of the ResourceGroups, a nested stack of a server and its five deployments.
MEMBER = {
    "heat_template_version": "2018-08-31",
    "parameters": {"rev": {"type": "number", "default": 0}, "index": {"type": "number"}},
    "resources": {
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "config": "true", "inputs": [{"name": "REV"}]},
        },
        "srv": {
            "type": "OS::Heat::DeployedServer",
            "properties": {"name": {"list_join": ["-", ["scale", {"get_param": "OS::stack_name"}]]}},
        },
        **{
            f"d{i}": {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {
                    "config": {"get_resource": "cfg"},
                    "server": {"get_resource": "srv"},
                    "input_values": {"REV": {"get_param": "rev"} if i == 0 else i},
                    "signal_transport": "CFN_SIGNAL",
                },
            }
            for i in range(PER_SERVER)
        },
    },
}


def nested_template(deployments: int) -> dict[str, Any]:
    """The same deployments as two ResourceGroups of N/10 nested stacks (member.yaml) each.

    Each member is a server with five deployments (issue 17's shape: 50,000 deployments as
    10,000 nested server templates); group k passes rev<k> to its members' first deployment
    only, so the update of rev0 re-runs 10 %, as in the flat shape.
    """
    members = max(1, deployments // PER_SERVER // 2)
    resources = {
        f"g{k}": {
            "type": "OS::Heat::ResourceGroup",
            "properties": {
                "count": members,
                "resource_def": {
                    "type": "member.yaml",
                    "properties": {"rev": {"get_param": f"rev{k}"}, "index": "%index%"},
                },
            },
        }
        for k in range(2)
    }
    params = {f"rev{k}": {"type": "number", "default": 0} for k in range(10)}
    return {"heat_template_version": "2018-08-31", "parameters": params, "resources": resources}


def request(deployments: int, **extra: Any) -> dict[str, Any]:
    """A create or update request body: the template, and the member template for --nested."""
    body: dict[str, Any] = {"template": template(deployments), **extra}
    if os.environ.get("SCALE_SHAPE") == "nested":
        body["files"] = {"member.yaml": json.dumps(MEMBER)}
    return body


def sent(deployments: int, **extra: Any) -> bytes:
    """request()'s body as a client sends it: JSON, built a resource at a time, so a client's dict of
    a million deployments (1.5 GB) is never whole in this process."""
    if os.environ.get("SCALE_SHAPE") in ("groups", "nested"):  # small templates: built whole
        return json.dumps(request(deployments, **extra)).encode()
    whole = template(1)  # the parameters, the config, one server and one deployment
    resources = whole.pop("resources")
    head = json.dumps({"template": {**whole, "resources": "RESOURCES"}, **extra})
    cut = head.index('"RESOURCES"')  # where the resources go
    parts = ['"cfg": ' + json.dumps(resources["cfg"])]
    parts += (f'"srv{s}": ' + json.dumps(_server(s)) for s in range(max(1, deployments // PER_SERVER)))
    parts += (f'"d{i}": ' + json.dumps(_deployment(i)) for i in range(deployments))
    return (head[:cut] + "{" + ", ".join(parts) + "}" + head[cut + len('"RESOURCES"') :]).encode()


def received(raw: bytes) -> dict[str, Any]:
    """A sent() body as `anneal serve` holds it: decoded as its API decodes a stack's body
    (``parse_json``: equal parts shared)."""
    from control.api.body import parse_json  # noqa: PLC0415 (the child's imports)

    body: dict[str, Any] = parse_json(raw, shared=True)
    return body


def cpu() -> float:
    """CPU time of this process (user + system), seconds."""
    t = os.times()
    return t.user + t.system


def hwm_mb() -> float:
    """Peak RSS of this process so far (VmHWM), MB."""
    kb = next(
        int(line.split()[1])
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmHWM:")
    )
    return round(kb / 1024, 1)


def new_generations(body: bytes, seen: set[tuple[str, int]]) -> list[tuple[str, int, str]]:
    """(deployment, generation, CFN_SIGNAL signature) of each generation in a document not in *seen*."""
    doc = json.loads(body)
    meta = doc["anneal"]["deployments"]
    found = []
    for item in doc["deployments"]:
        m = meta[item["id"]]
        key = (m["deployment_id"], m["generation"])
        if key in seen or m.get("stop"):
            continue
        seen.add(key)
        url = next((i["value"] for i in item["inputs"] if i["name"] == "deploy_signal_id"), None)
        if url:
            sig = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["sig"][0]
            found.append((m["deployment_id"], m["generation"], sig))
    return found


class FrontDoor:
    """The real HTTP API on a loopback port, driven by the real CLI in a subprocess."""

    def __init__(self, runner: Any, rt: Any, url: str, template: Path) -> None:
        self.runner, self.rt, self.url, self.template = runner, rt, url, template

    @classmethod
    async def open(
        cls, settings: Any, rt: Any, engine: Any, defs: Any, deployments: int, write: bool = True
    ) -> FrontDoor:
        """Serve the API; with *write*, the template the CLI sends is written beside the data."""
        from aiohttp import web  # noqa: PLC0415

        from control.api.app import api_app  # noqa: PLC0415
        from control.api.app_keys import DEFS, ENGINE, RUNTIME  # noqa: PLC0415

        path = settings.data_dir / "scale.json"
        if write:
            path.write_text(json.dumps(template(deployments), indent=1))
        app = api_app(settings)
        app[RUNTIME], app[ENGINE], app[DEFS] = rt, engine, defs
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return cls(runner, rt, f"http://127.0.0.1:{port}", path)

    async def run(self, traversal: int, *args: str) -> dict[str, Any]:
        """One CLI command to its exit: wall time, the child's own CPU meanwhile, the CLI's peak
        RSS, and the events of *traversal* it printed against those stored."""
        from sqlalchemy import func, select  # noqa: PLC0415

        from control.store.orm import EventRow, StackRow  # noqa: PLC0415

        out_path = self.template.with_name(f"cli-{args[1]}.out")
        t0, c0 = time.monotonic(), cpu()
        with out_path.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                str(Path(sys.executable).with_name("anneal")),
                *args,
                stdout=out,
                stderr=out,
                cwd=ROOT,
                env={**os.environ, "ANNEAL_URL": self.url, "ANNEAL_TOKEN": self.rt.keys.admin_token},
            )
            # The CLI's own peak RSS: VmHWM of its process, which exec started afresh (the
            # rusage of children counts the pages a child shared with this process before exec).
            peak_kb = 0
            status = Path(f"/proc/{proc.pid}/status")
            while proc.returncode is None:
                with contextlib.suppress(OSError, StopIteration, ValueError):
                    line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
                    peak_kb = max(peak_kb, int(line.split()[1]))
                with contextlib.suppress(asyncio.TimeoutError):
                    async with asyncio.timeout(0.2):
                        await proc.wait()
            rc = proc.returncode
        seconds, used = time.monotonic() - t0, cpu() - c0
        text = out_path.read_text(errors="replace")
        if rc != 0:
            raise RuntimeError(f"anneal {' '.join(args)} exited {rc}:\n{text[-3000:]}")
        async with self.rt.sessions() as session:
            live = select(StackRow.id).where(StackRow.name == "scale").scalar_subquery()
            # A deleted stack's last event keeps its name (control/engine/purge.py).
            gone = select(EventRow.stack_id).where(EventRow.stack_name == "scale")
            stored = await session.scalar(
                select(func.count()).where(
                    (EventRow.stack_id == live) | EventRow.stack_id.in_(gone),
                    EventRow.traversal == traversal,
                )
            )
        printed = len(re.findall(r"^\d\d:\d\d:\d\d  ", text, re.MULTILINE))
        return {
            "seconds": seconds,
            "cpu": used,
            "events_printed": printed,
            "events_stored": stored,
            "cli_peak_rss_mb": round(peak_kb / 1024, 1),
        }

    async def close(self) -> None:
        await self.runner.cleanup()


def progress(n: int, phase: str, r: dict[str, Any]) -> None:
    """A phase's figures on stderr as it ends (a run stopped in a later phase keeps them); with
    SCALE_TRACEMALLOC=PREFIX, the largest holders of traced memory then (``held``)."""
    print(f"{time.strftime('%H:%M:%S')} {n} {phase}: {json.dumps(r)}", file=sys.stderr, flush=True)
    prefix = os.environ.get("SCALE_TRACEMALLOC")
    if prefix:
        Path(f"{prefix}.{n}.{phase}.txt").write_text(held(n))


def trace_memory() -> None:
    """Start tracing allocations (4 frames each) when SCALE_TRACEMALLOC is set: Python runs about
    twice as slowly, so such a run's times are not figures."""
    if os.environ.get("SCALE_TRACEMALLOC"):
        tracemalloc.start(4)


def held(n: int, top: int = 30) -> str:
    """The traced memory still allocated, by where it was allocated (4 frames), largest first,
    in bytes per deployment of *n*."""
    gc.collect()
    stats = tracemalloc.take_snapshot().statistics("traceback")
    total = sum(s.size for s in stats)
    lines = [f"traced {total / 1e6:.1f} MB, {total / n:.0f} B per deployment"]
    for s in stats[:top]:
        lines.append(f"{s.size / n:8.0f} B {s.count / n:6.2f} objects per deployment")
        lines += [f"    {f.filename}:{f.lineno}" for f in s.traceback]
    return "\n".join(lines) + "\n"
