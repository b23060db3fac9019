"""Following a stack until it settles: its events as they happen, then the verdict and any failures."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import Any

from control.cli.client import Client, ClientError, api_path
from control.cli.output import show, when


def after_change(client: Client, args: argparse.Namespace, stack: dict[str, Any], what: str) -> int:
    if not args.wait:
        show(stack, args.format)
        return 0
    print(f"stack {stack['name']} {what} (version {stack['version']})")
    for warning in stack.get("warnings", []):
        print(f"warning: {warning}")
    return wait_for(client, stack["name"], args.timeout, since=_last_event_before(client, stack))


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


def _print_events(events: list[dict[str, Any]], last: int) -> int:
    for ev in events:
        last = ev["id"]
        reason = f": {ev['reason']}" if ev["reason"] and ev["reason"] != "state changed" else ""
        print(f"{when(ev['timestamp'])}  {ev['resource_name']:<24} {ev['action']}_{ev['status']}{reason}")
    return last


def wait_for(client: Client, name: str, timeout: float, since: int = 0) -> int:
    """Print events as they happen until the stack settles; 0 on COMPLETE."""
    deadline = time.monotonic() + timeout
    last, rolled_back = since, ""
    while time.monotonic() < deadline:
        try:
            # The stack first: events read after it include every one up to the state it shows.
            stack = client.call("GET", api_path("stacks", name), query={"summary": "true"})
            query = {"after": str(last)}
            if stack["status"].endswith("IN_PROGRESS"):
                query["wait"] = "5"  # long-poll: answered as soon as a newer event exists
            events = client.call("GET", api_path("stacks", name, "events"), query=query)
        except ClientError as err:
            if err.status == 404:
                # Its events stay readable by its name: the last ones come before the verdict.
                with contextlib.suppress(ClientError):
                    _print_events(
                        client.call("GET", api_path("stacks", name, "events"), query={"after": str(last)}),
                        last,
                    )
                print(f"stack {name} deleted")
                return 0
            raise
        if not stack["status"].endswith("IN_PROGRESS"):
            # Events that happened between the two reads above come before the last line.
            with contextlib.suppress(ClientError):
                events = client.call("GET", api_path("stacks", name, "events"), query={"after": str(last)})
        last = _print_events(events, last)
        rolled_back = _rollback_reason(name, events) or rolled_back
        if not stack["status"].endswith("IN_PROGRESS"):
            return _verdict(client, name, stack, rolled_back)
        time.sleep(0.05)
    print(f"anneal: stack {name} still in progress after {timeout:g} s", file=sys.stderr)
    return 1


def _rollback_reason(name: str, events: list[dict[str, Any]]) -> str:
    """Why the stack rolled back, from its ROLLBACK IN_PROGRESS event among *events* ("" if none)."""
    found = ""
    for ev in events:  # the stack's own events are named by the stack
        if ev["resource_name"] in ("", name) and (ev["action"], ev["status"]) == ("ROLLBACK", "IN_PROGRESS"):
            found = str(ev["reason"]).removeprefix("Stack ROLLBACK started: ")
    return found


def _verdict(client: Client, name: str, stack: dict[str, Any], rolled_back: str) -> int:
    """Print how the stack settled; 0 only for a COMPLETE create, update, delete, suspend or resume.

    A rollback that completed is still a change that failed: non-zero, with the reason it rolled back.
    """
    print(f"stack {name}: {stack['status']} ({stack['status_reason']})")
    if stack["status"].startswith("ROLLBACK"):
        print(f"stack {name} was rolled back: {rolled_back or 'the change failed'}")
    if stack["status"].endswith("FAILED") or stack["status"].startswith("ROLLBACK"):
        for f in client.call("GET", api_path("stacks", name, "failures")):
            print_failure(f)
        return 1
    return 0


def print_failure(f: dict[str, Any]) -> None:
    print(f"  {f['resource']}: {f['reason']}")
    for key in ("deploy_stdout", "deploy_stderr"):
        if f.get(key):
            print(f"    {key} (tail):")
            for line in str(f[key]).splitlines():
                print(f"      {line}")
