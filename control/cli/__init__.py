"""`anneal`: run the control plane (`serve`) and ask it things (everything else, over REST).

This module parses the command line. commands: the COMMANDS table and its handlers;
output: tables, json, yaml; client: the REST client; follow: `--wait` and `--follow`;
stack_request, signal_import, log: the longer commands' parts; serve: `anneal serve`, imported only when it runs, so the
operator commands never load SQLAlchemy; db: `anneal db`, imported the same way; validate and
stack_request (`control.hot`, the slowest import) only by the commands that send or check a
template, signal_import (the agent's offline transport) only by the two that use it;
background: `anneal serve --background` and `--stop`; serve_options and transport_options:
serve's options; events, graph, report, completion: the shell's parts (docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from control.cli import access, background, commands, pages, serve_options
from control.cli.client import ClientError
from control.cli.output import TerminalSafe

FORMATS = ("table", "json", "yaml", "value")
DEPLOYMENT_REF = "the deployment's id, a unique prefix of it, or STACK/RESOURCE"
WAIT_HELP = "show live progress (JSON lines with -f json); non-zero exit on failure"


def _connection(parser: argparse.ArgumentParser) -> None:
    """Where the operator commands connect, and as whom."""
    parser.add_argument("--config", help="CLI config file with url and token (else ANNEAL_URL/ANNEAL_TOKEN)")
    parser.add_argument(
        "--project",
        dest="in_project",
        help="admin token: the project whose stack and server names are meant, and where creates go "
        "(else ANNEAL_PROJECT); other tokens act in their own project",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anneal", description="Anneal control plane and operator CLI")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('anneal')}")
    _connection(parser)
    sub = parser.add_subparsers(dest="group", required=True)
    serve_options.add(sub.add_parser("serve", help="run the control plane"))
    dbs = sub.add_parser("db", help="the database's schema").add_subparsers(dest="command", required=True)
    serve_options.database(
        dbs.add_parser("status", help="the schema's revision; exit 1 if it needs an upgrade")
    )
    p = serve_options.database(
        dbs.add_parser("upgrade", help="bring the schema to the newest revision, in one transaction")
    )
    p.add_argument("--dry-run", action="store_true", help="print the SQL it would run; change nothing")
    _stack(sub.add_parser("stack", help="stacks").add_subparsers(dest="command", required=True))
    _template(sub.add_parser("template", help="templates").add_subparsers(dest="command", required=True))
    dep = sub.add_parser("deployment", help="deployments").add_subparsers(dest="command", required=True)
    p = _fmt(dep.add_parser("list", help="list deployments"))
    p.add_argument("--stack")
    p.add_argument("--server")
    p.add_argument("--status", choices=("IN_PROGRESS", "COMPLETE", "FAILED"))
    pages.add_options(p, "deployments")
    p = _fmt(dep.add_parser("show", help="one deployment with inputs, outputs, stdout, stderr"))
    p.add_argument("id", help=DEPLOYMENT_REF)
    p.add_argument("--attempts", action="store_true", help="its attempts (retry policy): code, times, stderr")
    p = dep.add_parser("log", help="a deployment's output; --follow: live until it finishes")
    p.add_argument("id", help=DEPLOYMENT_REF)
    p.add_argument("--follow", action="store_true", help="keep printing new output until it finishes")
    p.add_argument("--timeout", type=float, default=24 * 3600.0, help="give up following after S seconds")
    srv = sub.add_parser("server", help="servers").add_subparsers(dest="command", required=True)
    p = _fmt(srv.add_parser("create", help="create a server; prints its one-time enrolment token"))
    p.add_argument("name")
    p.add_argument("--transport", help="HTTP, SWIFT, S3, LOCAL, RELAY or Heat's POLL_* (docs/transports.md)")
    p.add_argument(
        "--heat-compatible",
        action="store_true",
        help="the server runs Heat's own agent chain: print its metadata URL instead of a token",
    )
    p = _fmt(srv.add_parser("transport", help="move a server to another transport"))
    p.add_argument("name")
    p.add_argument("transport", help="HTTP, SWIFT, S3, LOCAL, RELAY or Heat's POLL_* (docs/transports.md)")
    _fmt(srv.add_parser("token", help="a new one-time enrolment token for a server")).add_argument("name")
    p = _fmt(
        srv.add_parser("media", help="write an offline enrolment bundle (enrol.json) for a LOCAL server")
    )
    p.add_argument("name")
    p.add_argument("dir", type=Path, help="the media's directory (enrol.json is written there, mode 0600)")
    _fmt(srv.add_parser("list", help="list servers"))
    _fmt(srv.add_parser("show", help="a server and its deployments")).add_argument("name")
    p = _fmt(srv.add_parser("delete", help="delete a server; refused while a stack uses it"))
    p.add_argument("name")
    p.add_argument(
        "--force",
        action="store_true",
        help="delete it even while stacks use it: its deployments in progress fail",
    )
    key = sub.add_parser("key", help="the document-signing key").add_subparsers(dest="command", required=True)
    _fmt(key.add_parser("show", help="the signing key's id, public key and rotation chain"))
    _fmt(key.add_parser("rotate", help="a new signing key, chained from the current one"))
    sig = sub.add_parser("signal", help="signals").add_subparsers(dest="command", required=True)
    p = _fmt(
        sig.add_parser(
            "import", help="import signal files (and enrolment requests) carried back from LOCAL servers"
        )
    )
    p.add_argument(
        "dir",
        type=Path,
        help="directory of <deployment id>.<generation>.json and enrol.<server id>.json files",
    )
    access.add_parsers(sub, _fmt)
    p = sub.add_parser("completion", help="print the shell completion script: anneal completion bash|zsh")
    p.add_argument("shell", choices=("bash", "zsh"))
    return parser


def _check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _fmt(
        sub.add_parser("check", help="check the servers (changing nothing) and the ledgers; exit 1 on drift")
    )
    p.add_argument("name")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the servers' answers")
    p.add_argument(
        "--ledger-only", action="store_true", help="compare the agents' ledgers only; run no check"
    )


def _stack(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, text in (("create", "create a stack"), ("update", "update a stack")):
        p = _fmt(sub.add_parser(name, help=text))
        p.add_argument("name")
        p.add_argument("-t", "--template", required=True, type=Path, help="HOT template file")
        _environment_and_parameters(p)
        p.add_argument(
            "--no-upload-outside",
            action="store_true",
            help="refuse a get_file naming a file outside the template's directory (absolute or ../); "
            "without it such a file is uploaded with a warning",
        )
        p.add_argument("--wait", action="store_true", help=WAIT_HELP)
        p.add_argument("--timeout", type=float, default=3600.0, help="how long --wait waits (s)")
        p.add_argument(
            "--rollback",
            action="store_true",
            help="if a deployment fails, return the stack to its previous state (Heat: disable_rollback false)",
        )
        if name == "update":
            p.add_argument("--existing", action="store_true", help="keep parameters given before")
            p.add_argument("--if-match", help="fail with 409 unless the stack is at this version")
            p.add_argument(
                "--dry-run",
                action="store_true",
                help="print what the update would create, replace, re-run and delete, per server, "
                "and which inputs change; nothing changes",
            )
    for name, text in (
        ("delete", "delete a stack"),
        ("suspend", "suspend a stack (deployments listing SUSPEND run it)"),
        ("resume", "resume a suspended stack (deployments listing RESUME run it)"),
    ):
        p = _fmt(sub.add_parser(name, help=text))
        p.add_argument("name")
        p.add_argument("--wait", action="store_true", help=WAIT_HELP)
        p.add_argument("--timeout", type=float, default=3600.0)
        if name == "delete":
            p.add_argument(
                "--force",
                action="store_true",
                help="skip the DELETE configs (a server that never comes back), each with a warning event",
            )
    _abandon_adopt(sub)
    p = _fmt(sub.add_parser("list", help="list stacks"))
    p.add_argument("--nested", action="store_true", help="list nested stacks too (with their parent)")
    _fmt(
        sub.add_parser("cancel", help="fail deployments in progress as cancelled; agents stop their hooks")
    ).add_argument("name")
    _check_parser(sub)
    p = _fmt(sub.add_parser("converge", help="re-apply what `stack check` found missing, failed or drifted"))
    p.add_argument("name")
    p.add_argument("--wait", action="store_true", help=WAIT_HELP)
    p.add_argument("--timeout", type=float, default=3600.0)
    pages.stack_parsers(sub, _fmt)
    for name, text in (
        ("outputs", "stack outputs"),
        ("failures", "failed deployments with the tail of their output"),
    ):
        _fmt(sub.add_parser(name, help=text)).add_argument("name")
    res = sub.add_parser("resource", help="one resource of a stack").add_subparsers(
        dest="resource_command", required=True
    )
    p = _fmt(res.add_parser("signal", help="signal a resource (a scaling policy adjusts its group)"))
    p.add_argument("name", help="the stack")
    p.add_argument("resource")
    p.add_argument("--data", default="", help="the signal's details, a JSON object (optional)")
    p = _fmt(sub.add_parser("events", help="the stack's events"))
    p.add_argument("name")
    p.add_argument(
        "--nested-depth", type=int, default=0, metavar="N", help="and its nested stacks' N levels down"
    )
    p.add_argument("--follow", action="store_true", help="keep printing new events until the stack settles")
    p.add_argument("--resource", help="only this resource's events")
    p.add_argument(
        "--since", help="only events from this time on: ISO 8601, or an age such as 30s, 10m, 2h, 1d"
    )
    p.add_argument(
        "--limit", type=int, metavar="N", help="at most N events (then the command for the next page)"
    )
    p.add_argument(
        "--after", type=int, default=0, metavar="ID", help="only events after this event id (paging)"
    )
    p.add_argument("--newest", action="store_true", help="newest first: the last events (with --limit)")
    p.add_argument("--before", type=int, metavar="ID", help="only events before this event id (paging back)")
    sub.add_parser("graph", help="the dependency graph as Graphviz DOT (| dot -Tsvg)").add_argument("name")


def _template(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _fmt(
        sub.add_parser(
            "validate",
            help="check a template offline as the control plane would (no control plane needed); exit 1 on any error",
        )
    )
    p.add_argument("template", type=Path, metavar="FILE", help="HOT template file")
    _environment_and_parameters(p)
    p.add_argument(
        "--max-template-bytes",
        type=serve_options.size,
        default=512 * 1024,
        metavar="SIZE",
        help="the cap `anneal serve --max-template-bytes` applies (default 512K)",
    )
    p.add_argument(
        "--max-nested-depth",
        type=int,
        default=5,
        metavar="N",
        help="the cap `anneal serve --max-nested-depth` applies (default 5)",
    )
    p.add_argument(
        "--max-evaluation-bytes",
        type=serve_options.size,
        default=0,
        metavar="SIZE",
        help="the budget `anneal serve --max-evaluation-bytes` applies (default: 128 times the template cap, at least 64M)",
    )


def _environment_and_parameters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-e",
        "--environment",
        action="append",
        default=[],
        type=Path,
        help="environment file (repeat; later ones win)",
    )
    p.add_argument("-P", "--parameter", action="append", default=[], metavar="KEY=VALUE")


def _abandon_adopt(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("abandon", help="remove a stack, running nothing; print its data for `stack adopt`")
    p.add_argument("name")
    p.add_argument("--output-file", type=Path, help="write the abandon data here instead of printing it")
    _handover_args(p)
    p = _fmt(sub.add_parser("handover", help="where the stack's next abandon (any API) hands its servers"))
    p.add_argument("name")
    _handover_args(p)
    p.add_argument(
        "--clear", action="store_true", help="hand it nowhere: the next abandon keeps its servers here"
    )
    p = _fmt(sub.add_parser("adopt", help="a stack again from `stack abandon`'s data; nothing runs"))
    p.add_argument("name")
    p.add_argument("--adopt-file", type=Path, required=True, help="the data `stack abandon` wrote")


def _handover_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--to", metavar="URL", help="the receiving control plane's URL: its agents move there")
    p.add_argument(
        "--to-key", type=Path, metavar="FILE", help="its keys, as `anneal key show -f json` prints them there"
    )


def _fmt(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("-f", "--format", choices=FORMATS, default="table")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(given)
    if args.group in ("serve", "db"):
        return _on_this_machine(args, given)
    # What the control plane answers (names, reasons, a hook's output) reaches a terminal escaped.
    with (
        contextlib.redirect_stdout(TerminalSafe(sys.stdout)),
        contextlib.redirect_stderr(TerminalSafe(sys.stderr)),
    ):
        try:
            if args.group == "template":  # offline: no control plane, no credentials
                from control.cli.validate import validate  # noqa: PLC0415 (control.hot loads for this alone)

                return validate(args)
            if args.group == "completion":
                from control.cli.completion import script  # noqa: PLC0415 (shtab loads for this alone)

                print(script(build_parser(), args.shell), end="")
                return 0
            return commands.run(args)
        except ClientError as e:
            print(f"anneal: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130


def _on_this_machine(args: argparse.Namespace, given: list[str]) -> int:
    """`anneal serve` and `anneal db`: they work on the data dir and the database, not over REST."""
    # Their imports (SQLAlchemy, Alembic, the engine) stay out of the operator commands' path.
    if args.group == "db":
        from control.cli.db import db  # noqa: PLC0415

        return db(args)
    if args.stop:
        return background.stop(args)
    if args.background:
        return background.start(args, given)
    from control.cli.serve import serve  # noqa: PLC0415

    return serve(args)
