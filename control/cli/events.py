"""`anneal stack events`: a stack's events, filtered by resource and time, a page at a time."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from datetime import UTC, datetime

from control.cli import follow
from control.cli.client import Client, ClientError, api_path
from control.cli.output import show, when
from control.cli.report import reporter

COLUMNS = ["time", "resource_name", "action", "status", "reason"]
NESTED_COLUMNS = ["time", "stack_name", "resource_name", "action", "status", "reason"]
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since(text: str, now: float | None = None) -> float:
    """Epoch seconds from ISO 8601 (UTC unless a zone is given) or an age such as 30s, 10m, 2h, 1d."""
    age = _AGE.fullmatch(text.strip())
    if age:
        return (now if now is not None else time.time()) - float(age[1]) * _UNIT[age[2]]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as e:
        raise ClientError(
            f"--since: expected ISO 8601 (2026-11-26T10:00:00Z) or an age (10m, 2h), got {text!r}"
        ) from e
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def stack_events(client: Client, args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise ClientError("--limit: at least 1")
    if args.follow:
        return follow.wait_for(client, args.name, 24 * 3600.0, since=args.after, out=reporter(args.format))
    query = {"after": str(args.after)}
    if args.nested_depth:
        query["nested_depth"] = str(args.nested_depth)
    if args.resource:
        query["resource"] = args.resource
    if args.since:
        query["since"] = repr(since(args.since))
    if args.limit:
        query["limit"] = str(args.limit)
    if args.newest:
        query["newest"] = "true"
    if args.before is not None:
        query["before"] = str(args.before)
    events = client.call("GET", api_path("stacks", args.name, "events"), query=query)
    events = [{**e, "time": when(e["timestamp"])} for e in events]  # the time of day, as event lines show it
    show(events, args.format, NESTED_COLUMNS if args.nested_depth else COLUMNS)
    if args.limit and len(events) == args.limit:
        # The next page: newest first, the events before this page's last; else those after it.
        page = ["--newest", "--before"] if args.newest else ["--after"]
        again = [
            "anneal",
            "stack",
            "events",
            args.name,
            *page,
            str(events[-1]["id"]),
            "--limit",
            str(args.limit),
        ]
        for option, value in (
            ("--resource", args.resource),
            ("--since", args.since),
            ("--nested-depth", args.nested_depth),
        ):
            again += [option, str(value)] if value else []
        print(f"more events: {shlex.join(again)}", file=sys.stderr)
    return 0
