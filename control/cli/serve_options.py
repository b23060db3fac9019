"""`anneal serve`'s and `anneal db`'s options: where the data lives, what to listen on, the caps."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from control.cli import transport_options

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_SIZE = re.compile(r"(\d+)\s*(?:([KMG])(?:I?B)?|B)?")


def size(text: str) -> int:
    """A byte count: digits with an optional K, M or G suffix (powers of 1024; KB, KiB too)."""
    found = _SIZE.fullmatch(text.strip().upper())
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected bytes, e.g. 524288, 512K or 16M")
    return int(found.group(1)) * _UNITS[found.group(2) or ""]


def at_least_one(text: str) -> int:
    """A count of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number, 1 or more")
    return value


def database(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("anneal-data"),
        help="database, admin token and signing key live here (default ./anneal-data)",
    )
    p.add_argument("--db", default="", help="SQLAlchemy URL (default: SQLite in the data dir)")
    return p


def add(p: argparse.ArgumentParser) -> None:
    database(p)
    p.add_argument("--listen", default="127.0.0.1:8770", help="HOST:PORT (default 127.0.0.1:8770)")
    p.add_argument(
        "--heat-listen",
        default="",
        metavar="HOST:PORT",
        help="also serve Heat's Orchestration API v1 here, for the openstack CLI (off by default; docs/heat-api.md)",
    )
    p.add_argument(
        "--metrics-listen",
        default="",
        metavar="HOST:PORT",
        help="also serve /metrics here without a token, for Prometheus (loopback only; docs/operations.md)",
    )
    p.add_argument(
        "--metrics-public",
        action="store_true",
        help="allow --metrics-listen on a non-loopback address (anyone who reaches it reads the metrics)",
    )
    p.add_argument("--public-url", default="", help="URL agents use to reach this control plane")
    p.add_argument(
        "--provisioner",
        choices=("enrol", "local"),
        default="enrol",
        help="enrol: wait for agents to enrol; local: start one local agent per server",
    )
    p.add_argument(
        "--deployment-timeout", type=float, default=3600.0, help="default per-deployment timeout (s)"
    )
    p.add_argument(
        "--timeout-minute",
        type=float,
        default=60.0,
        help="seconds one minute of a stack's timeout_mins lasts (default 60; shorter for tests)",
    )
    p.add_argument(
        "--stack-timeout",
        type=int,
        default=60,
        metavar="MINUTES",
        help="minutes a stack's action may take when the stack sets no timeout_mins "
        "(Heat's stack_action_timeout; default 60, 0: none)",
    )
    p.add_argument(
        "--document-ttl",
        type=float,
        default=24 * 3600.0,
        help="seconds a signed document stays valid; re-signed after half (default 86400)",
    )
    p.add_argument(
        "--audit-retention-days",
        type=float,
        default=90.0,
        help="days an audit log row is kept, then pruned (default 90; 0 keeps every row)",
    )
    p.add_argument(
        "--agent-arg",
        action="append",
        default=[],
        help="extra argument for local agents (repeat), e.g. --agent-arg=--poll-wait=5",
    )
    p.add_argument(
        "--work-lease",
        type=float,
        default=15.0,
        help="seconds a claimed engine step stays leased; a dead process's work moves on after this",
    )
    p.add_argument(
        "--step-slice",
        type=int,
        default=100,
        metavar="N",
        help="resources an engine step acts on between commits, each publishing its documents at once "
        "(also within a few ms); 0: one commit per step",
    )
    p.add_argument(
        "--republish-poll",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="how often each process checks for documents changed by other processes on the database "
        "(default: 1 s on SQLite; 10 s on PostgreSQL, where LISTEN/NOTIFY carries them at once)",
    )
    p.add_argument(
        "--heartbeat-lease",
        type=float,
        default=90.0,
        help="seconds an agent may stay silent before `stack check` reports its server silent",
    )
    p.add_argument(
        "--max-template-bytes",
        type=size,
        default=512 * 1024,
        metavar="SIZE",
        help="cap on a template's text and each environment's, e.g. 16M (default 512K, Heat's)",
    )
    p.add_argument(
        "--document-cache",
        type=at_least_one,
        default=20_000,
        metavar="N",
        help="servers whose signed documents stay in memory (default 20000; the rest are rendered on fetch)",
    )
    p.add_argument(
        "--max-nested-depth",
        type=int,
        default=5,
        metavar="N",
        help="how deep template resources and groups may nest stacks (default 5, Heat's)",
    )
    p.add_argument(
        "--max-request-bytes",
        type=size,
        default=0,
        metavar="SIZE",
        help="cap on any request body (default: twice the template cap, at least 2M)",
    )
    p.add_argument(
        "--max-evaluation-bytes",
        type=size,
        default=0,
        metavar="SIZE",
        help="what one template's functions may build in all (default: 128 times the template cap, at least 64M)",
    )
    p.add_argument(
        "--max-agents",
        type=int,
        default=1000,
        metavar="N",
        help="agents this process serves; a warning at start names the descriptor limit they need "
        "(2 each + 256; default 1000)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=15.0,
        metavar="S",
        help="close a connection idle for S seconds, kept alive or never sending a request (default 15)",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="a request body must arrive within S seconds, else 408 (default 30)",
    )
    p.add_argument("--log-level", default="INFO")
    run = p.add_mutually_exclusive_group()
    run.add_argument(
        "--background",
        action="store_true",
        help="run detached (log in DATA_DIR/serve.log); return once it listens",
    )
    run.add_argument("--stop", action="store_true", help="stop the control plane --background started")
    p.add_argument(
        "--pid-file",
        help="write the PID here once listening, removed at exit (--background: DATA_DIR/serve.pid)",
    )
    p.add_argument(
        "--access-log", action="store_true", help="log every request: peer address, request line, status"
    )
    transport_options.add(p)
    transport_options.add(p, transport_options.KEYSTONE, "Keystone (docs/heat-api.md)")
