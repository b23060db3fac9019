"""`anneal-agent`: the command line. It loads what the command needs only once parsed.

``run`` for an agent whose every URL is http:// withholds ``ssl`` before asyncio is imported
(``agent.tls``): the commands, the loop and asyncio are imported after that decision.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from agent import config, loglimit, tls
from agent.ledger import LEDGER_FILE


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, told the terminal's width as shutil would have found it.

    argparse makes one for every ``add_argument`` and its own asks shutil, which (with bz2 and
    lzma) would then stay loaded in every running agent: 0.4 MiB.
    """

    def __init__(self, prog: str) -> None:
        width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 0
        if not width:
            try:
                width = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 80
            except (OSError, ValueError):  # not a terminal, or stdout closed
                width = 80
        super().__init__(prog, width=max(width - 2, 20))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anneal-agent", description="Anneal's deployment agent", formatter_class=_Formatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {config.version()}")
    parser.add_argument("--log-level", default=os.environ.get("ANNEAL_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)
    enrol = sub.add_parser(
        "enrol", help="register this server with the control plane", formatter_class=_Formatter
    )
    enrol.add_argument("--url", required=True, help="the control plane's URL")
    enrol.add_argument(
        "--token",
        default=os.environ.get("ANNEAL_ENROL_TOKEN"),
        help="one-time enrolment token (or ANNEAL_ENROL_TOKEN)",
    )
    for name, text in (
        ("run", "run until stopped"),
        ("once", "one pass, then exit"),
        ("status", "print the agent's view"),
    ):
        p = sub.add_parser(name, help=text, formatter_class=_Formatter)
        p.add_argument("--url", help="control plane URL (to enrol first with ANNEAL_ENROL_TOKEN)")
        p.add_argument("--poll-wait", type=float, help="long-poll wait in seconds")
        p.add_argument("--heartbeat-interval", type=float, help="seconds between heartbeats")
        p.add_argument("--hook-dir", action="append", help="directory of hook executables (repeat)")
        p.add_argument(
            "--heat-compat",
            action="store_true",
            help="replace Heat's agent: read Heat's documents, signal in Heat's format (docs/heat-compat.md)",
        )
        p.add_argument(
            "--os-collect-config", type=Path, help="with --heat-compat: os-collect-config.conf to read"
        )
        p.add_argument("--metadata-url", help="with --heat-compat: the request collector's metadata URL")
        p.add_argument(
            "--media-dir",
            help="LOCAL transport: where the media with document.json (and, to enrol offline, enrol.json) is mounted",
        )
        p.add_argument("--signal-dir", help="LOCAL transport: signal outbox (default MEDIA_DIR/signals)")
        p.add_argument(
            "--allow-group",
            action="append",
            help="run only these hook groups (repeat; else agent.json's allowed_groups, else any)",
        )
        p.add_argument(
            "--allow-config",
            action="append",
            metavar="sha256:HEX",
            help="run only configs with these digests (repeat; else agent.json's allowed_configs, else any)",
        )
    relay = sub.add_parser(
        "relay",
        help="store and forward documents and signals for an isolated network",
        formatter_class=_Formatter,
    )
    relay.add_argument("--listen", required=True, help="HOST:PORT the agents reach")
    relay.add_argument("--upstream", required=True, help="the control plane's URL")
    relay.add_argument(
        "--max-agents",
        type=int,
        default=1000,
        metavar="N",
        help="agents it serves; a warning at start names the descriptor limit they need (2 each + 256)",
    )
    relay.add_argument(
        "--idle-timeout", type=float, default=15.0, metavar="S", help="close connections idle for S seconds"
    )
    sub.choices["status"].add_argument("--json", action="store_true", help="print JSON")
    sub.choices["run"].add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve what `status --json` shows as Prometheus metrics at /metrics here, without a token (loopback)",
    )
    sub.choices["run"].add_argument(
        "--metrics-public", action="store_true", help="allow --metrics-listen on a non-loopback address"
    )
    for p in sub.choices.values():
        # Absolute: hooks run in their own working directories and are given paths inside it.
        p.add_argument(
            "--state-dir",
            required=True,
            type=lambda text: Path(text).absolute(),
            help="the agent's state directory",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    loglimit.install()  # a line repeated many times a second is logged once per window, with the count
    if args.command == "run" and not needs_tls(args):
        tls.withhold()
    from agent import commands  # noqa: PLC0415 - after the TLS decision: asyncio imports ssl

    return commands.main(args, list(sys.argv[1:] if argv is None else argv))


def needs_tls(args: argparse.Namespace) -> bool:
    """True unless every URL this agent knows is http://: its command line, agent.json, its ledger.

    The ledger holds the transport the last document named, the document (signal URLs) and
    the queued signals; its files are searched as bytes, so an old https URL left in a free
    page only loads ``ssl`` for nothing. Heat's agent (``--heat-compat``) always has it.
    """
    if os.environ.get(tls.RESTART_ENV) or args.heat_compat or args.os_collect_config or args.metadata_url:
        return True
    state_dir: Path = args.state_dir
    files = [config.config_path(state_dir), state_dir / LEDGER_FILE, state_dir / f"{LEDGER_FILE}-wal"]
    return tls.needed([args.url or ""]) or tls.in_files(files)
