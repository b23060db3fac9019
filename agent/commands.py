"""`anneal-agent` enrol, run, once, status, relay: what each command does (``agent.cli`` parses them)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent import addresses, client, config, diskfull, heatcompat, keys, metrics, status, tls
from agent.errors import AgentError, ConfigError
from agent.fsutil import lock_state_dir, write_atomic
from agent.httpclient import Session
from agent.ledger import Ledger
from agent.loop import Agent
from agent.transports import offline
from agent.transports.switch import adopt_enrolment

log = logging.getLogger("agent")
#: Seconds a stopping agent waits for its running hook (systemd's TimeoutStopSec should exceed it).
STOP_GRACE = 60.0


def main(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run the parsed command; an agent that met an https URL without ``ssl`` restarts itself with it."""
    if args.command == "relay":
        from agent import relay, serving  # noqa: PLC0415 - only the relay needs the server side of aiohttp

        limits = serving.Limits(max_agents=args.max_agents, idle_timeout=args.idle_timeout)
        relay.serve(args.listen, args.upstream, args.state_dir, limits)
        return 0
    try:
        return asyncio.run(_dispatch(args))
    except RestartForTls:
        log.warning("restarting with TLS: an https URL is in use now")
        sys.stderr.flush()
        env = {**os.environ, tls.RESTART_ENV: "1"}
        os.execve(sys.executable, [sys.executable, "-m", "agent", *argv], env)  # noqa: S606 - the same agent, same pid
    except AgentError as e:
        print(f"anneal-agent: {e}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as e:
        if not diskfull.is_full(e):
            raise
        # Before the agent runs (opening the ledger, keys, config): one line, not a traceback.
        print(f"anneal-agent: state dir {args.state_dir} is full: {diskfull.reason(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


class RestartForTls(Exception):
    """The agent stopped to start again with ``ssl`` (``agent.tls``)."""


async def _dispatch(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir
    if getattr(args, "metrics_listen", None):  # refused before anything starts
        try:
            args.metrics_at = metrics.check_listen(args.metrics_listen, args.metrics_public)
        except ValueError as e:
            raise ConfigError(str(e)) from e
    if args.command == "enrol":
        await enrol(state_dir, args.url, args.token)
        print(f"enrolled; config written to {config.config_path(state_dir)}")
        return 0
    heat = heatcompat.settings_for(args, state_dir)
    if heat is not None:
        agent = await _open(args, lambda: heatcompat.HeatAgent(heat, state_dir, args.hook_dir))
        agent.config = agent.config.with_overrides(**_allowlist(args))
        return await _run_agent(args, agent)
    cfg = config.load(state_dir)
    if cfg is None and args.command != "status" and args.media_dir and not args.url:
        cfg = enrol_offline(state_dir, Path(args.media_dir), args.signal_dir)
    if cfg is None:
        token = os.environ.get("ANNEAL_ENROL_TOKEN")
        if not (args.url and token):
            raise ConfigError(f"{state_dir} holds no enrolment; run `anneal-agent enrol` first")
        cfg = await enrol(state_dir, args.url, token)
    cfg = cfg.with_overrides(
        poll_wait=args.poll_wait,
        heartbeat_interval=args.heartbeat_interval,
        hook_dirs=tuple(args.hook_dir) if args.hook_dir else None,
        media_dir=args.media_dir,
        signal_dir=args.signal_dir,
        **_allowlist(args),
    )
    return await _run_agent(args, await _open(args, lambda: Agent(cfg, state_dir)))


def _allowlist(args: argparse.Namespace) -> dict[str, Any]:
    """The node allowlist given on the command line; what is not given stays as agent.json says."""
    return {
        "allowed_groups": tuple(args.allow_group) if args.allow_group else None,
        "allowed_configs": tuple(args.allow_config) if args.allow_config else None,
    }


async def _open(args: argparse.Namespace, make: Callable[[], Agent]) -> Agent:
    """The agent; `run` started on a full state dir waits for space to open its ledger, never exits."""
    watch = diskfull.DiskWatch(args.state_dir)
    tries = 0
    while True:
        try:
            agent = make()
        except (OSError, sqlite3.Error) as e:
            if args.command != "run" or not diskfull.is_full(e):
                raise
            tries += 1
            watch.note("open its ledger", e, tries)
            await asyncio.sleep(watch.delay(tries))
            continue
        watch.clear()
        return agent


async def _run_agent(args: argparse.Namespace, agent: Agent) -> int:
    if args.command != "status":
        _lock(agent.state_dir)
    if args.command == "status":
        view = status.view(agent)
        print(json.dumps(view, indent=2, sort_keys=True, default=str) if args.json else status.render(view))
        return 0
    if args.command == "once":
        return await agent.once()
    at: tuple[str, int] | None = getattr(args, "metrics_at", None)
    server = await metrics.serve(at[0], at[1], lambda: status.view(agent)) if at else None
    try:
        await _run_until_signalled(agent)
    finally:
        if server is not None:
            server.close()
    return 0


def _lock(state_dir: Path) -> None:
    """One agent per state dir: two would race on the run-once ledger."""
    try:
        lock_state_dir(state_dir)
    except OSError as e:
        pid_file = state_dir / "agent.pid"
        holder = pid_file.read_text().strip() if pid_file.exists() else "unknown"
        raise ConfigError(f"another agent (pid {holder}) is running on {state_dir}") from e


async def enrol(state_dir: Path, url: str, token: str | None) -> config.AgentConfig:
    if not token:
        raise ConfigError("an enrolment token is required (--token or ANNEAL_ENROL_TOKEN)")
    publics = keys.ensure_keys(state_dir)
    async with Session() as http:
        found = await addresses.discover()
        result = await client.enrol(http, url, token, publics, socket.gethostname(), found)
    cfg = config.AgentConfig(
        url=url.rstrip("/"),
        server_id=result["server_id"],
        name=result["name"],
        credential=result["credential"],
        document_url=result["document_url"],
        heartbeat_url=result["heartbeat_url"],
        control_public_key=result.get("control_public_key", ""),
    )
    ledger = Ledger(state_dir)
    try:
        kind = adopt_enrolment(ledger, result.get("transport"))
    finally:
        ledger.close()
    config.save(state_dir, cfg)
    log.info("enrolled as server %s (%s); documents come over %s", cfg.name, cfg.server_id, kind)
    return cfg


def enrol_offline(state_dir: Path, media_dir: Path, signal_dir: str | None) -> config.AgentConfig | None:
    """Enrol from the bundle on the media (`anneal server media`), without any network; None if none."""
    bundle = offline.read_bundle(media_dir)
    if bundle is None:
        return None
    out_dir = Path(signal_dir) if signal_dir else media_dir / "signals"
    cfg = offline.enrol(state_dir, bundle, str(media_dir), out_dir)
    ledger = Ledger(state_dir)
    try:
        adopt_enrolment(ledger, bundle["transport"])
    finally:
        ledger.close()
    config.save(state_dir, cfg)
    log.info("enrolled offline as server %s (%s); documents come from %s", cfg.name, cfg.server_id, media_dir)
    return cfg


async def _run_until_signalled(agent: Agent, grace: float = STOP_GRACE) -> None:
    """Run until SIGTERM/SIGINT; the first lets a running hook finish (up to *grace*), a second stops at once."""
    pid_file = agent.state_dir / "agent.pid"
    try:
        write_atomic(pid_file, f"{os.getpid()}\n".encode(), 0o644)
    except OSError as e:
        if not diskfull.is_full(e):
            raise
        log.warning("%s: the agent runs without it", agent.disk.message(f"write {pid_file}", e))
    task = asyncio.create_task(agent.run())
    loop = asyncio.get_running_loop()
    draining: list[asyncio.Task[None]] = []

    def on_signal() -> None:
        if draining:
            task.cancel()
            return
        log.info("stopping: no new deployments; waiting up to %g s for the running one", grace)

        async def drain_then_stop() -> None:
            await _drain(agent, grace)
            task.cancel()

        draining.append(loop.create_task(drain_then_stop()))

    restart: list[asyncio.Task[None]] = []

    def on_tls_needed() -> None:
        """Start nothing new, let the running hook finish (however long), then restart with ``ssl``."""
        if restart or draining:
            return

        async def finish_then_stop() -> None:
            agent.stopping = True
            while agent.running is not None:
                await asyncio.sleep(0.1)
            task.cancel()

        restart.append(loop.create_task(finish_then_stop()))

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    tls.on_needed = on_tls_needed
    with contextlib.suppress(asyncio.CancelledError):
        await task
    agent.ledger.close()
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()
    if restart and not draining:
        raise RestartForTls()


async def _drain(agent: Agent, grace: float) -> None:
    """Stop starting work; wait up to *grace* seconds for the running hook and its signal."""
    agent.stopping = True
    deadline = time.monotonic() + grace
    while agent.running is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    while agent.ledger.pending_count() and time.monotonic() < deadline:
        agent.outbox.wake.set()
        await asyncio.sleep(0.1)
