"""What the control plane asks of a running agent besides new generations.

- ``stop``: a generation the control plane gave up on (``anneal stack cancel``, or
  its timeout passed) is marked ``stop`` in the document. A hook running it is
  stopped the way dispatch stops hooks (SIGTERM, then SIGKILL of its group); one
  not yet started is never started. Either way the run is recorded as finished
  with status 143, so the ledger never runs that generation; a stopped hook's
  signal carries the tail of what it printed until then, which the control plane
  keeps with the FAILED status (why it was slow).
- the ledger report sent with each heartbeat: per item of the current document,
  its deployment, generation, ledger state and status code. `anneal stack check`
  compares it with the database to find drift.
- ``check``: run an applied generation's hook in check mode, changing nothing
  (``agent.checks``; its ``Checker`` is the loop's, through this module).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from agent import output, wire
from agent.checks import Checker
from agent.ledger import Ledger

__all__ = [
    "STOPPED",
    "STOPPED_CODE",
    "Checker",
    "ledger_report",
    "run_unless_stopped",
    "stop_requested",
    "stopped_signal",
]

STOPPED_CODE = 143
STOPPED = "stopped: the control plane cancelled this generation (cancel or timeout)"


def stop_requested(doc: wire.Document | None, item_id: str) -> bool:
    meta = doc.meta.get(item_id) if doc is not None else None
    return bool(meta is not None and meta.stop)


def stopped_signal(state_dir: Path, item_id: str) -> wire.Signal:
    """Status 143 with the tail of what the stopped hook had printed."""
    stdout, stderr = output.printed(state_dir, item_id)
    return wire.Signal(STOPPED_CODE, stdout=stdout, stderr=f"{stderr.rstrip()}\n{STOPPED}".lstrip())


async def run_unless_stopped(
    hook: Awaitable[wire.Signal], item_id: str, changed: asyncio.Event, document: Any, state_dir: Path
) -> wire.Signal:
    """Run *hook*; stop it if a newer document (``changed``) marks *item_id* ``stop``."""
    task = asyncio.ensure_future(hook)
    try:
        while True:
            waiter = asyncio.ensure_future(changed.wait())
            done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                waiter.cancel()
                return task.result()
            changed.clear()
            if stop_requested(document(), item_id):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return stopped_signal(state_dir, item_id)
    finally:
        if not task.done():  # the agent itself is stopping
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def ledger_report(ledger: Ledger, doc: wire.Document | None) -> dict[str, Any]:
    """item id -> [deployment id, generation, state, status code], for the document's items."""
    if doc is None:
        return {}
    out: dict[str, Any] = {}
    for item in doc.deployments:
        entry = ledger.entry(item.id)
        meta = doc.meta.get(item.id)
        if entry is not None:
            out[item.id] = [entry.deployment_id, entry.generation, entry.state, entry.status_code]
        elif meta is not None:
            out[item.id] = [meta.deployment_id, meta.generation, "missing", None]
    return out
