"""`anneal stack update --dry-run`: the plan of an update, printed per resource and per server."""

from __future__ import annotations

import argparse
import json
from typing import Any

from control.cli.client import Client, api_path
from control.cli.output import show

#: What each verdict is called in the summary line.
SUMMARY = (
    ("create", "to create"),
    ("replace", "to replace"),
    ("update", "to update in place"),
    ("delete", "to delete"),
    ("fail", "would fail"),
    ("unchanged", "unchanged"),
)


def dry_run(client: Client, args: argparse.Namespace, body: dict[str, Any]) -> int:
    """Ask for the plan of the update *body* would start and print it; nothing changes."""
    plan = client.call("PUT", api_path("stacks", args.name, "preview"), body)
    if args.format != "table":
        show(plan, args.format)
        return 0
    print(f"plan for stack {plan['stack']} (dry run: nothing was changed)")
    for warning in plan.get("warnings", []):
        print(f"warning: {warning}")
    if plan["parameters"]:
        print("parameters:")
        for key, change in plan["parameters"].items():
            print(f"  {key}: {_v(change['old'])} -> {_v(change['new'])}")
    print("resources:")
    for res in plan["resources"]:
        print_resource(res)
    counts = [(sum(r["change"] == kind for r in plan["resources"]), words) for kind, words in SUMMARY]
    print(", ".join(f"{n} {words}" for n, words in counts if n))
    return 0


def print_resource(res: dict[str, Any]) -> None:
    """One resource: its verdict, where it runs and what, why, the inputs that change, its members."""
    where = f" on {res['server']}" if res.get("server") else ""
    runs = f": runs {', '.join(res['runs'])}" if res.get("runs") else ""
    print(f"  {res['change']:<10} {res['name']} ({res['type']}){where}{runs}")
    if res.get("reason"):
        print(f"             {res['reason']}")
    for key, change in (res.get("inputs") or {}).items():
        print(f"             input {key}: {_v(change['old'])} -> {_v(change['new'])}")
    for member in res.get("members") or []:
        print(f"             member {member['member']} on {member['server']}: {member['change']}")


def _v(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)
