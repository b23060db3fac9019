"""Provisioners decide where a template's servers come from.

The control plane boots nothing. ``enrol`` (the default) waits for an agent
to enrol with the server's one-time token. ``local`` starts one agent process
per server on this machine, each with its own state dir (demo and tests), named by the
server's id: a name is never made into a path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)
#: What an agent writes in its state dir once enrolled (agent/config.py's CONFIG_FILE).
AGENT_CONFIG = "agent.json"


class Provisioner(Protocol):
    async def provision(self, server_id: str, name: str, enrol_token: str | None) -> None: ...
    async def release(self, server_id: str, name: str) -> None: ...
    def stopping(self) -> int: ...
    async def close(self) -> None: ...


class EnrolProvisioner:
    """Servers exist already; an operator or cloud-init enrols their agents."""

    async def provision(self, server_id: str, name: str, enrol_token: str | None) -> None:
        log.info("server %s awaits enrolment of its agent", name)

    async def release(self, server_id: str, name: str) -> None:
        return None

    def stopping(self) -> int:
        return 0

    async def close(self) -> None:
        return None


@dataclass
class _Agent:
    """A local agent process: started here, or adopted from a control plane that crashed."""

    pid: int
    proc: asyncio.subprocess.Process | None = None
    #: SIGTERM sent: a second one would stop a running hook at once instead of letting it finish.
    signalled: bool = False

    async def wait(self) -> None:
        if self.proc is not None:
            await self.proc.wait()
            return
        while _alive(self.pid):  # not our child: poll
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not stop in 10 s."""
        self.terminate()
        try:
            async with asyncio.timeout(10):
                await self.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            await self.wait()

    def terminate(self) -> None:
        """SIGTERM once: the agent lets a running hook finish, then exits."""
        if not self.signalled:
            self.signalled = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)


class LocalProvisioner:
    """One `anneal-agent run` subprocess per server, state under <data_dir>/agents/<server id>.

    Like a systemd unit with Restart=on-failure, an agent that exits is started
    again after a second, until the server is released or the control plane stops.
    An agent left running by a control plane that crashed is adopted, not killed:
    the work it is doing goes on. Until an agent holds its enrolment, a restart passes
    it the token it was given again (an agent that lost its enrolment answer has none).
    """

    RESTART_DELAY = 1.0

    def __init__(self, data_dir: Path, url: str, extra_args: tuple[str, ...] = ()) -> None:
        self._root = data_dir / "agents"
        self._url = url
        self._extra = extra_args
        self._agents: dict[str, _Agent] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._tokens: dict[str, str] = {}

    def state_dir(self, server_id: str) -> Path:
        return self._root / str(uuid.UUID(server_id))  # ids are UUIDs: never '..' or a '/'

    def enrolled(self, server_id: str) -> bool:
        """Whether the agent of server *server_id* holds its enrolment (its config in its state dir)."""
        return (self.state_dir(server_id) / AGENT_CONFIG).is_file()

    async def provision(self, server_id: str, name: str, enrol_token: str | None) -> None:
        if server_id in self._watchers:
            return
        if enrol_token:
            self._tokens[server_id] = enrol_token
        state = self.state_dir(server_id)
        await self._adopt_named(state, name)
        leftover = _leftover_pid(state)
        if leftover is not None:
            log.info("adopting agent pid %s still running for %s", leftover, name)
            self._agents[server_id] = _Agent(leftover)
        else:
            await self._start(server_id, name, enrol_token)
        self._watchers[server_id] = asyncio.create_task(self._watch(server_id, name))

    async def _adopt_named(self, state: Path, name: str) -> None:
        """Move a state dir an earlier version named by the server's name to its id (an upgrade).

        Its agent keeps its keys and enrolment (no rebuild); one still running there is
        stopped first, as it writes by that path. A name that is not one plain directory
        entry of the agents dir is never followed.
        """
        legacy = self._root / name
        plain = name not in ("", ".", "..") and "/" not in name and "\0" not in name
        if not plain or state.exists() or legacy.is_symlink() or not legacy.is_dir():
            return
        running = _leftover_pid(legacy)
        if running is not None:
            await _Agent(running).stop()
        legacy.rename(state)
        log.info("moved the local agent state of %s to %s", name, state)

    async def _start(self, server_id: str, name: str, enrol_token: str | None) -> None:
        state = self.state_dir(server_id)
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = dict(os.environ)
        if enrol_token:
            env["ANNEAL_ENROL_TOKEN"] = enrol_token  # not argv: /proc/*/cmdline is world-readable
        argv = [sys.executable, "-m", "agent", "run", "--state-dir", str(state), "--url", self._url]
        with open(state / "agent.log", "ab") as log_file:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                *self._extra,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
            )
        self._agents[server_id] = _Agent(proc.pid, proc)
        log.info("started local agent for %s (pid %s)", name, proc.pid)

    async def _watch(self, server_id: str, name: str) -> None:
        while True:
            await self._agents[server_id].wait()
            log.warning("local agent for %s exited; restarting", name)
            await asyncio.sleep(self.RESTART_DELAY)
            if self.enrolled(server_id):
                self._tokens.pop(server_id, None)
            await self._start(server_id, name, self._tokens.get(server_id))

    async def release(self, server_id: str, name: str) -> None:
        watcher = self._watchers.pop(server_id, None)
        self._tokens.pop(server_id, None)
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        agent = self._agents.pop(server_id, None)
        if agent is not None:
            await agent.stop()
        state = self.state_dir(server_id) if name else None  # no name: the control plane stops
        if state is not None and state.is_dir():
            # The server is gone: its state is kept aside, for an operator to read, never reused.
            state.rename(state.with_name(f"{server_id}.released"))

    def stopping(self) -> int:
        """The control plane stops: SIGTERM every agent now, restart none; ``close`` waits for them."""
        for watcher in self._watchers.values():
            watcher.cancel()
        for agent in self._agents.values():
            agent.terminate()
        return len(self._agents)

    async def close(self) -> None:
        await asyncio.gather(*(self.release(sid, "") for sid in list(self._watchers)))


def _leftover_pid(state: Path) -> int | None:
    """The pid of an agent still running on *state*, by its pid file and command line."""
    try:
        pid = int((state / "agent.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    if b"agent" not in cmdline or str(state).encode() not in cmdline or not _alive(pid):
        return None  # gone, or the pid was reused by something that is not our agent
    return pid


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (OSError, IndexError):
        return False
