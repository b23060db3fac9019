"""`anneal deployment log ID [--follow]`: a deployment's output, live while it runs.

While a deployment runs, its agent sends progress (the tail of the hook's output and the
byte count so far, see agent/progress.py). The command polls the deployment and uses that
byte count as its cursor: it prints only what is new, and says how much it could not show
when more came between two polls than a progress tail holds. It ends when the deployment
does, with its status (exit 0 COMPLETE, 1 FAILED or timed out).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from control.cli.client import Client, api_path

#: Seconds between two polls of a running deployment.
POLL = 1.0


def show_log(client: Client, dep_id: str, *, follow: bool, timeout: float, out: TextIO | None = None) -> int:
    """Print the deployment's output (to stdout as it is when called); with *follow*, until it finishes."""
    out = out or sys.stdout
    deadline = time.monotonic() + timeout
    cursor: tuple[Any, int] = (None, 0)  # (generation, output bytes already printed)
    while True:
        dep = client.call("GET", api_path("deployments", dep_id))
        progress = dep.get("progress") or {}
        if progress:
            cursor = print_new(progress, cursor, out)
        if dep["status"] != "IN_PROGRESS":
            return finish(dep, streamed=cursor[1] > 0, out=out)
        if not follow:
            if not progress:
                print(f"deployment {dep_id}: IN_PROGRESS, no output yet", file=out)
            return 0
        if time.monotonic() > deadline:
            print(f"anneal: deployment {dep_id} still in progress after {timeout:g} s", file=sys.stderr)
            return 1
        time.sleep(POLL)


def print_new(progress: dict[str, Any], cursor: tuple[Any, int], out: TextIO) -> tuple[Any, int]:
    """Print the part of the progress tail not printed yet; return the new cursor."""
    generation, printed = cursor
    if progress.get("generation") != generation:
        printed = 0  # a new run of the deployment: its output starts again
    total = int(progress.get("output_bytes", 0))
    tail = str(progress.get("output_tail", "")).encode("utf-8", "replace")
    new = total - printed
    if new > 0:
        if new > len(tail):
            out.write(f"[... {new - len(tail)} bytes not shown ...]\n")
        out.write(
            tail[-new:].decode("utf-8", "ignore") if new < len(tail) else tail.decode("utf-8", "ignore")
        )
        out.flush()
    return progress.get("generation"), max(total, printed)


def finish(dep: dict[str, Any], *, streamed: bool, out: TextIO) -> int:
    """The end: the result's output when none was streamed, then the status line."""
    if not streamed:
        for key in ("deploy_stdout", "deploy_stderr"):
            if dep.get(key):
                out.write(dep[key] if dep[key].endswith("\n") else dep[key] + "\n")
    code = dep.get("deploy_status_code")
    print(f"deployment {dep['id']}: {dep['status']} (status code {code}): {dep['status_reason']}", file=out)
    return 0 if dep["status"] == "COMPLETE" else 1
