"""The benchmarks' control plane (tests/support's, quieter), an admin client for it, and enrolled fake servers."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.controlplane import ControlPlane, start_control_plane


def start_plane(
    workdir: Path,
    *,
    cpu: int | None = None,
    extra: Sequence[str] = (),
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> ControlPlane:
    """`anneal serve` as the benchmarks run it (tests/support's harness): warnings only, *cpu* pins it to one core.

    *env* is added to its environment (a baseline commit's tree on PYTHONPATH: bench/agent_rss.py ``env_for``).
    """
    wrap = ["taskset", "-c", str(cpu)] if cpu is not None else []
    return start_control_plane(
        workdir, "--log-level", "WARNING", *extra, defaults=(), wrap=wrap, port=port, env=env
    )


def status_kib(pid: int, field: str = "VmRSS") -> int:
    """A /proc/<pid>/status field in KiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_leftover_agents(agents_dir: Path) -> None:
    """SIGTERM local agents still running after their control plane stopped (it normally stops them)."""
    for pid_file in agents_dir.glob("*/agent.pid"):
        try:
            pid = int(pid_file.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            continue  # gone already
        if str(pid_file.parent).encode() in cmdline:  # that PID is still this agent, not a reused one
            os.kill(pid, signal.SIGTERM)


class ApiError(Exception):
    """The control plane answered a bench request with an unexpected status."""


class Api:
    """The control plane's REST API as the bench uses it (admin token by default)."""

    def __init__(self, session: aiohttp.ClientSession, cp: ControlPlane) -> None:
        self.session, self.cp = session, cp

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        expect: Sequence[int] = (200, 201, 202),
    ) -> Any:
        headers = {"Authorization": f"Bearer {token or self.cp.token}"}
        async with self.session.request(
            method, self.cp.url + path, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=120)
        ) as resp:
            raw = await resp.read()
            if resp.status not in expect:
                raise ApiError(f"{method} {path}: {resp.status} {raw[:500]!r}")
            return json.loads(raw) if raw else None

    async def put_stack(self, name: str, template: dict[str, Any], *, create: bool) -> None:
        body = {"name": name, "template": template}
        if create:
            await self.call("POST", "/v1/stacks", body)
        else:
            await self.call("PUT", f"/v1/stacks/{name}", body)

    async def wait_stack(self, name: str, timeout: float = 120) -> str:
        """Poll until the stack leaves IN_PROGRESS; its final status.

        Its state alone (``summary``): the whole view decrypts every resource, which for a stack of
        10,000 resources polled ten times a second takes the control plane's CPU from the step it waits for.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = str((await self.call("GET", f"/v1/stacks/{name}?summary=true"))["status"])
            if not status.endswith("IN_PROGRESS"):
                return status
            await asyncio.sleep(0.1)
        raise ApiError(f"stack {name} still in progress after {timeout} s")


@dataclass(frozen=True)
class Server:
    """A server enrolled by the bench: what a simulated agent needs to poll."""

    name: str
    server_id: str
    credential: str
    #: The control plane's Ed25519 public key pinned at enrolment (base64): documents are checked against it.
    control_key: str = ""


def random_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


async def create_servers(api: Api, names: Sequence[str], concurrency: int = 8) -> dict[str, str]:
    """Server records awaiting enrolment: name -> one-time token."""
    gate = asyncio.Semaphore(concurrency)

    async def one(name: str) -> tuple[str, str]:
        async with gate:
            return name, str((await api.call("POST", "/v1/servers", {"name": name}))["enrol_token"])

    return dict(await asyncio.gather(*(one(n) for n in names)))


async def enrol_servers(api: Api, names: Sequence[str], concurrency: int = 8) -> list[Server]:
    """Create and enrol servers as an agent would, with random public keys."""
    tokens = await create_servers(api, names, concurrency)
    gate = asyncio.Semaphore(concurrency)

    async def one(name: str) -> Server:
        body = {
            "token": tokens[name],
            "public_keys": {"sign": random_key(), "box": random_key()},
            "hostname": name,
        }
        async with gate:
            got = await api.call("POST", "/v1/agent/enrol", body, expect=(201,))
        return Server(name, got["server_id"], got["credential"], got["control_public_key"])

    return list(await asyncio.gather(*(one(n) for n in names)))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def deployments_template(
    servers: Sequence[str],
    per_server: int,
    value: str,
    *,
    transport: str = "NO_SIGNAL",
    config: str | None = None,
) -> dict[str, Any]:
    """A HOT template putting *per_server* script deployments on each named, existing server."""
    script = config or '#!/bin/sh\necho "$VALUE"\n'
    resources: dict[str, Any] = {
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "inputs": [{"name": "VALUE"}], "config": script},
        },
    }
    for i, name in enumerate(servers):
        resources[f"srv{i}"] = {"type": "OS::Heat::DeployedServer", "properties": {"name": name}}
        for j in range(per_server):
            resources[f"dep{i}_{j}"] = {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {
                    "name": f"{j:02d}-bench",
                    "config": {"get_resource": "cfg"},
                    "server": {"get_resource": f"srv{i}"},
                    "signal_transport": transport,
                    "input_values": {"VALUE": value},
                },
            }
    return {"heat_template_version": "2018-08-31", "resources": resources}
