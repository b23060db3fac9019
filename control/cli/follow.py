"""Following a stack until it settles: its events as they happen, its progress, then the verdict and any failures."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import Any

from control.cli.client import Client, ClientError, api_path
from control.cli.output import show
from control.cli.report import JsonLines, Progress, Reporter, reporter

#: Seconds between two reads of the stack's progress counts.
PROGRESS_EVERY = 1.0


def after_change(client: Client, args: argparse.Namespace, stack: dict[str, Any], what: str) -> int:
    if not args.wait:
        show(stack, args.format)
        return 0
    out = reporter(args.format)
    out.started(stack, what)
    since = _last_event_before(client, stack)
    return wait_for(client, stack["name"], args.timeout, since=since, out=out)


def _last_event_before(client: Client, stack: dict[str, Any]) -> int:
    """The id just before the first event of the traversal *stack* started (its "started" event)."""
    query = {"traversal": str(stack["traversal"]), "limit": "1"}
    try:
        first = client.call("GET", api_path("stacks", stack["id"], "events"), query=query)
    except ClientError as err:
        if err.status == 404:  # deleted before we looked: wait_for says so
            return 0
        raise
    return (first[0]["id"] - 1) if first else 0


def _print_events(out: Reporter, events: list[dict[str, Any]], last: int) -> int:
    for ev in events:
        last = ev["id"]
        out.event(ev)
    return last


def _read_stack(
    client: Client, name: str, counted: float, force: bool = False
) -> tuple[dict[str, Any], float]:
    """The stack's summary, with its progress counts at most every PROGRESS_EVERY seconds (or *force*).

    At 50,000 resources the counts cost a query of the rows: a busy stack's follower
    must not ask for them on every batch of events.
    """
    query = {"summary": "true"}
    if force or time.monotonic() - counted >= PROGRESS_EVERY:
        query["progress"], counted = "true", time.monotonic()
    return client.call("GET", api_path("stacks", name), query=query), counted


def wait_for(client: Client, name: str, timeout: float, since: int = 0, out: Reporter | None = None) -> int:
    """Report events and progress as they happen until the stack settles; 0 on COMPLETE."""
    out = out or reporter("table")
    deadline = time.monotonic() + timeout
    last, progress, counted, rolled_back = since, Progress(), 0.0, ""
    while time.monotonic() < deadline:
        try:
            # The stack first: events read after it include every one up to the state it shows.
            stack, counted = _read_stack(client, name, counted)
            query = {"after": str(last)}
            if stack["status"].endswith("IN_PROGRESS"):
                query["wait"] = "5"  # long-poll: answered as soon as a newer event exists
            events = client.call("GET", api_path("stacks", name, "events"), query=query)
        except ClientError as err:
            if err.status == 404:
                return _deleted(client, name, last, progress, out)
            raise
        settled = not stack["status"].endswith("IN_PROGRESS")
        if settled:
            # Events that happened between the two reads above come before the last line.
            with contextlib.suppress(ClientError):
                events = client.call("GET", api_path("stacks", name, "events"), query={"after": str(last)})
        last = _print_events(out, events, last)
        rolled_back = _rollback_reason(name, events) or rolled_back
        counts = stack
        if settled and "progress" not in stack:  # the last line counts what the stack ended with
            with contextlib.suppress(ClientError):
                counts, counted = _read_stack(client, name, counted, force=True)
        if "progress" in counts:
            changed = progress.update(counts["progress"], stack["action"] == "DELETE")
            out.progress(progress, changed, final=settled)
        if settled:
            return _verdict(client, stack, out, rolled_back)
        time.sleep(0.05)
    out.result({"stack": name, "status": "IN_PROGRESS", "timed_out": True})
    print(f"anneal: stack {name} still in progress after {timeout:g} s", file=sys.stderr)
    return 1


def _deleted(client: Client, name: str, last: int, progress: Progress, out: Reporter) -> int:
    # Its events stay readable by its name: the last ones come before the verdict.
    with contextlib.suppress(ClientError):
        _print_events(
            out, client.call("GET", api_path("stacks", name, "events"), query={"after": str(last)}), last
        )
    progress.update({"resources": 0, "done": 0, "failed": 0, "in_progress": 0}, deleting=True)
    out.progress(progress, True, final=True)
    out.result({"stack": name, "status": "DELETE_COMPLETE", "deleted": True})
    if not isinstance(out, JsonLines):
        print(f"stack {name} deleted")
    return 0


def _rollback_reason(name: str, events: list[dict[str, Any]]) -> str:
    """Why the stack rolled back, from its ROLLBACK IN_PROGRESS event among *events* ("" if none)."""
    found = ""
    for ev in events:  # the stack's own events are named by the stack
        if ev["resource_name"] in ("", name) and (ev["action"], ev["status"]) == ("ROLLBACK", "IN_PROGRESS"):
            found = str(ev["reason"]).removeprefix("Stack ROLLBACK started: ")
    return found


def _verdict(client: Client, stack: dict[str, Any], out: Reporter, rolled_back: str) -> int:
    """Report how the stack settled; 0 only for a COMPLETE create, update, delete, suspend or resume.

    A rollback that completed is still a change that failed: non-zero, with the reason it rolled back.
    """
    name, status = stack["name"], stack["status"]
    failed = status.endswith("FAILED") or status.startswith("ROLLBACK")
    failures = client.call("GET", api_path("stacks", name, "failures")) if failed else []
    result = {"stack": name, "status": status, "status_reason": stack["status_reason"], "failures": failures}
    if status.startswith("ROLLBACK"):
        result["rolled_back"] = rolled_back or "the change failed"
    out.result(result)
    if not isinstance(out, JsonLines):
        print(f"stack {name}: {status} ({stack['status_reason']})")
        if status.startswith("ROLLBACK"):
            print(f"stack {name} was rolled back: {result['rolled_back']}")
        for f in failures:
            print_failure(f)
    return 1 if failed else 0


def print_failure(f: dict[str, Any]) -> None:
    print(f"  {f['resource']}: {f['reason']}")
    for key in ("deploy_stdout", "deploy_stderr"):
        if f.get(key):
            print(f"    {key} (tail):")
            for line in str(f[key]).splitlines():
                print(f"      {line}")
