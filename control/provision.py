"""Provisioners decide where a template's servers come from.

The control plane boots nothing. ``enrol`` (the default) waits for an agent
to enrol with the server's one-time token. ``local`` starts one agent process
per server on this machine, each with its own state dir (demo and tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)


class Provisioner(Protocol):
    async def provision(self, server_id: str, name: str, enrol_token: str | None) -> None: ...
    async def release(self, server_id: str, name: str) -> None: ...
    async def close(self) -> None: ...


class EnrolProvisioner:
    """Servers exist already; an operator or cloud-init enrols their agents."""

    async def provision(self, server_id: str, name: str, enrol_token: str | None) -> None:
        log.info("server %s awaits enrolment of its agent", name)

    async def release(self, server_id: str, name: str) -> None:
        return None

    async def close(self) -> None:
        return None


class LocalProvisioner:
    """One `anneal-agent run` subprocess per server, state under <data_dir>/agents/<name>.

    Like a systemd unit with Restart=on-failure, an agent that exits is started
    again after a second, until the server is released or the control plane stops.
    """

    RESTART_DELAY = 1.0

    def __init__(self, data_dir: Path, url: str, extra_args: tuple[str, ...] = ()) -> None:
        self._root = data_dir / "agents"
        self._url = url
        self._extra = extra_args
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}

    def state_dir(self, name: str) -> Path:
        return self._root / name

    async def provision(self, server_id: str, name: str, enrol_token: str | None) -> None:
        if server_id in self._watchers:
            return
        await self._start(server_id, name, enrol_token)
        self._watchers[server_id] = asyncio.create_task(self._watch(server_id, name))

    async def _start(self, server_id: str, name: str, enrol_token: str | None) -> None:
        state = self.state_dir(name)
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = dict(os.environ)
        if enrol_token:
            env["ANNEAL_ENROL_TOKEN"] = enrol_token  # not argv: /proc/*/cmdline is world-readable
        argv = [
            sys.executable,
            "-m",
            "agent",
            "run",
            "--state-dir",
            str(state),
            "--url",
            self._url,
            *self._extra,
        ]
        with open(state / "agent.log", "ab") as log_file:
            self._procs[server_id] = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
            )
        log.info("started local agent for %s (pid %s)", name, self._procs[server_id].pid)

    async def _watch(self, server_id: str, name: str) -> None:
        while True:
            await self._procs[server_id].wait()
            log.warning(
                "local agent for %s exited with %s; restarting", name, self._procs[server_id].returncode
            )
            await asyncio.sleep(self.RESTART_DELAY)
            await self._start(server_id, name, None)

    async def release(self, server_id: str, name: str) -> None:
        watcher = self._watchers.pop(server_id, None)
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        proc = self._procs.pop(server_id, None)
        if proc is not None:
            await _stop(proc)

    async def close(self) -> None:
        for server_id in list(self._watchers):
            await self.release(server_id, "")

    def pids(self) -> dict[str, int]:
        return {sid: p.pid for sid, p in self._procs.items() if p.returncode is None}


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the agent we started, then SIGKILL if it does not stop in 10 s."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
