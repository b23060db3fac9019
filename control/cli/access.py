"""`anneal token create|list|revoke` and `anneal audit`: API tokens with a project and a role, and who did what."""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from control.cli.client import Client, ClientError, api_path
from control.cli.output import show

ROLES = ("admin", "member", "reader")
TOKEN_COLUMNS = ["id", "name", "project", "role", "created_at", "expires_at", "revoked_at"]
AUDIT_COLUMNS = ["at", "who", "project", "api", "method", "route", "target", "status"]
#: A duration: a number and a unit (s, m, h, d); a bare number is seconds.
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``12h`` or ``30d`` (argparse type)."""
    found = DURATION.fullmatch(text.strip())
    if found is None or float(found[1]) <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a duration above 0 such as 3600, 15m, 12h or 30d, got {text!r}"
        )
    return float(found[1]) * UNITS[found[2]]


def add_parsers(sub: Any, fmt: Any) -> None:
    """The ``token`` and ``audit`` groups of `anneal`; *fmt* adds the --format option."""
    tok = sub.add_parser("token", help="API tokens with a project and a role").add_subparsers(
        dest="command", required=True
    )
    p = fmt(tok.add_parser("create", help="a new token; its value is printed this once"))
    p.add_argument("--project", help="the project it acts in (not for --role admin: every project)")
    p.add_argument(
        "--role",
        choices=ROLES,
        required=True,
        help="admin: all projects; member: read and write; reader: read",
    )
    p.add_argument("--expires", type=duration, metavar="S", help="it expires after S (3600, 15m, 12h, 30d)")
    p.add_argument("--name", default="", help="a name for it in `token list` and the audit log")
    fmt(tok.add_parser("list", help="every token (never their values)"))
    fmt(tok.add_parser("revoke", help="revoke a token: refused from the next request on")).add_argument("id")
    p = fmt(sub.add_parser("audit", help="the audit log: every mutating request, who, what, when, result"))
    p.add_argument("--since", help="from this time: ISO 8601, epoch seconds, or a duration ago (1h, 7d)")
    p.add_argument("--limit", type=int, default=100, help="the newest N rows (default 100)")
    p.set_defaults(command="show")


def token_create(client: Client, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"role": args.role, "name": args.name}
    if args.project is not None:
        body["project"] = args.project
    if args.expires is not None:
        body["expires"] = args.expires
    made = client.call("POST", api_path("tokens"), body)
    if args.format == "table":
        where = f"project {made['project']}" if made["project"] else "every project"
        print(f"token {made['id']} ({made['role']} of {where}) made; it is shown this once:")
        print(made["token"])
        return 0
    show(made, args.format)
    return 0


def token_list(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", api_path("tokens")), args.format, TOKEN_COLUMNS)
    return 0


def token_revoke(client: Client, args: argparse.Namespace) -> int:
    revoked = client.call("DELETE", api_path("tokens", args.id))
    if args.format == "table":
        print(f"token {revoked['id']} revoked")
        return 0
    show(revoked, args.format)
    return 0


def audit_show(client: Client, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise ClientError("--limit: expected 1 or more")
    query = {"limit": str(args.limit)}
    if args.since:
        query["since"] = _since(args.since)
    show(client.call("GET", api_path("audit"), query=query), args.format, AUDIT_COLUMNS)
    return 0


def _since(text: str) -> str:
    """A duration ago as epoch seconds; anything else as given (the control plane checks it)."""
    try:
        return str(time.time() - duration(text)) if text[-1:] in "smhd" and text[:1].isdigit() else text
    except argparse.ArgumentTypeError:
        return text


COMMANDS = {
    ("token", "create"): token_create,
    ("token", "list"): token_list,
    ("token", "revoke"): token_revoke,
    ("audit", "show"): audit_show,
}
