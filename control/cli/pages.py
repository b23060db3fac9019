"""Listings a page at a time, for stacks of a million: `deployment list` and `stack resources`."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from typing import Any

from control.cli.client import Client, ClientError, api_path
from control.cli.output import show

DEPLOYMENT_COLUMNS = ["id", "name", "server_name", "action", "status", "status_reason"]
RESOURCE_COLUMNS = ["name", "type", "status", "physical_id", "current"]
NESTED_RESOURCE_COLUMNS = ["stack_name", *RESOURCE_COLUMNS]


def paging(args: argparse.Namespace) -> dict[str, str]:
    """The query of ``--limit N --after ID`` (none without --limit: every row, as before)."""
    if args.limit is None:
        return {}
    if args.limit < 1:
        raise ClientError("--limit: at least 1")
    return {"limit": str(args.limit), "after": str(args.after)}


def next_page(words: list[str], rows: list[dict[str, Any]], limit: int | None) -> None:
    """A full page: print the command that reads the next one (on stderr, so the output stays parseable)."""
    if limit and len(rows) == limit:
        again = [*words, "--after", str(rows[-1]["id"]), "--limit", str(limit)]
        print(f"more: {shlex.join(['anneal', *again])}", file=sys.stderr)


def deployment_list(client: Client, args: argparse.Namespace) -> int:
    """`deployment list [--stack S] [--server S] [--status S] [--limit N --after ID]`."""
    given = {"stack": args.stack, "server": args.server, "status": args.status}
    query = {**{k: v for k, v in given.items() if v}, **paging(args)}
    data = client.call("GET", api_path("deployments"), query=query)
    show(data, args.format, DEPLOYMENT_COLUMNS)
    words = ["deployment", "list", *(x for k, v in given.items() if v for x in (f"--{k}", v))]
    next_page(words, data, args.limit)
    return 0


def stack_resources(client: Client, args: argparse.Namespace) -> int:
    """`stack resources NAME [--nested-depth N] [--limit N --after ID]`."""
    query = {"nested_depth": str(args.nested_depth)} if args.nested_depth else {}
    data = client.call("GET", api_path("stacks", args.name, "resources"), query={**query, **paging(args)})
    show(data, args.format, NESTED_RESOURCE_COLUMNS if query else RESOURCE_COLUMNS)
    depth = ["--nested-depth", str(args.nested_depth)] if args.nested_depth else []
    next_page(["stack", "resources", args.name, *depth], data, args.limit)
    return 0


def add_options(p: argparse.ArgumentParser, rows: str) -> None:
    """``--limit`` and ``--after`` on a listing of *rows*."""
    p.add_argument(
        "--limit", type=int, metavar="N", help=f"at most N {rows} (then the command for the next page)"
    )
    p.add_argument("--after", default="0", metavar="ID", help=f"only {rows} after this id (paging)")


def stack_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    fmt: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
) -> None:
    """`stack show` (the first page of resources) and `stack resources` (paged on demand)."""
    p = fmt(sub.add_parser("show", help="status, resources (the first page of a big stack's), outputs"))
    p.add_argument("name")
    p.add_argument(
        "--resources-limit",
        type=int,
        default=100,
        metavar="N",
        help="at most N resources (0: all; default 100)",
    )
    p = fmt(sub.add_parser("resources", help="the stack's resources"))
    p.add_argument("name")
    p.add_argument(
        "--nested-depth", type=int, default=0, metavar="N", help="and its nested stacks' N levels down"
    )
    add_options(p, "resources")
