"""`anneal stack check`: ask the servers to check on the host, wait for their answers, print them."""

from __future__ import annotations

import argparse
import time
from typing import Any

from control.cli.client import Client, api_path
from control.cli.output import show

#: Seconds between two reads of the answers while they come in.
POLL = 0.5


def run(client: Client, args: argparse.Namespace) -> int:
    """Exit 0 when in sync and every server answered, 1 when anything drifted or did not answer."""
    if not args.ledger_only:
        client.call("POST", api_path("stacks", args.name, "check"))
    report = _answers(client, args.name, 0.0 if args.ledger_only else args.timeout)
    ok = report["in_sync"] and not report.get("pending")
    if args.format != "table":
        show(report, args.format)
        return 0 if ok else 1
    print(
        f"stack {report['stack']} ({report['status']}): {report['deployments_checked']} deployment(s) "
        f"on {report['servers']} server(s) checked"
    )
    for d in report["drift"]:
        where = d.get("resource") or d.get("server")
        print(f"  {d['kind']:<8} {where}: {d['reason']}")
        for line in (d.get("diff") or "").splitlines():
            print(f"           | {line}")
    for h in report.get("host", []):
        if h["state"] == "pending":
            print(f"  unknown  {h['resource']} on {h['server']}: no answer within {args.timeout:g} s")
        elif h["state"] != "drifted":
            why = f": {h['reason']}" if h.get("reason") else ""
            print(f"  {h['state']:<8} {h['resource']} on {h['server']}{why}")
    print("in sync" if report["in_sync"] else f"{len(report['drift'])} drifted")
    return 0 if ok else 1


def _answers(client: Client, name: str, timeout: float) -> dict[str, Any]:
    """The check report once no answer is pending, or as it stands after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while True:
        report: dict[str, Any] = client.call("GET", api_path("stacks", name, "check"))
        if not report.get("pending") or time.monotonic() >= deadline:
            return report
        time.sleep(POLL)
