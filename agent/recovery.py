"""What the agent does, on start, with a deployment a crash interrupted.

A generation found ``started`` but not finished in the ledger was interrupted (the
agent was killed, the machine rebooted). Never a silent hang, never a silent second run:

* its hook, if still alive (the hook runs in its own session, so it outlives a killed
  agent), is killed first with every process below it (a hook's tool has a session of
  its own): the pid and its start time are in the ledger, so a recycled pid is never
  touched;
* if its config sets ``options.rerun_on_interrupt: true`` it runs again, at most
  ``MAX_RERUNS`` times, with the same ``ANNEAL_IDEMPOTENCY_KEY`` (the derived config id)
  and ``ANNEAL_RUN_ATTEMPT`` counting the runs;
* otherwise it is reported FAILED "interrupted by agent restart" with the output the hook
  had written (``agent.output``): the tool's stdout in ``deploy_stdout``, everything in
  ``deploy_stderr``.

``recover`` kills the orphans and decides; the agent's loop acts on the decisions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent import proctree, wire, wire_caps
from agent.ledger import Ledger
from agent.output import printed

log = logging.getLogger(__name__)
#: Runs of one generation after interruptions before it is reported FAILED instead.
MAX_RERUNS = 3
INTERRUPTED = "interrupted by agent restart"
#: Status code of an interrupted run (as if killed by SIGKILL).
INTERRUPTED_CODE = 137

#: The deployment item and its metadata in the document held, by item id (None when gone).
Lookup = Callable[[str], tuple[wire.DeploymentItem | None, wire.ItemMeta | None]]


@dataclass(frozen=True)
class Rerun:
    """Run the interrupted generation again: it goes back to ``received`` with *note*."""

    item_id: str
    note: str


@dataclass(frozen=True)
class Report:
    """Record the interrupted generation finished with *signal* (FAILED) and send it."""

    item_id: str
    item: wire.DeploymentItem | None
    meta: wire.ItemMeta | None
    signal: wire.Signal
    note: str = "interrupted"


def stop_orphan(identity: str | None, timeout: float = 10.0) -> bool:
    """Kill an interrupted hook, its group and every process below it, if that very process still runs."""
    if not identity:
        return False
    pid_text, _, started = identity.partition(" ")
    pid = int(pid_text)
    if not started or proctree.start_time(pid) != started:
        return False
    # The hook's tool runs in a session of its own: find it (and anything below) first.
    below = proctree.descendants(pid)
    log.warning(
        "the interrupted hook (pid %s) still runs; killing it and %d processes below it", pid, len(below)
    )
    own = os.getpgrp()
    for target in (pid, *below):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(target)
            if group != own:
                os.killpg(group, signal.SIGKILL)
            os.kill(target, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while proctree.start_time(pid) == started and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.05)
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def rerun_allowed(item: wire.DeploymentItem | None) -> bool:
    return bool(item is not None and (item.options or {}).get("rerun_on_interrupt") is True)


def retry_allows(meta: wire.ItemMeta | None, runs: int) -> bool:
    """The deployment's retry policy names `interrupted` and has an attempt left (agent/attempts.py)."""
    policy = (meta.retry if meta is not None else None) or {}
    return "interrupted" in (policy.get("retry_on") or ()) and runs <= int(policy.get("retries") or 0)


def attempts(ledger: Ledger, item_id: str) -> int:
    """How many times this generation's hook was started."""
    return int(ledger.get_state(f"runs:{item_id}", "0") or 0)


def recover(ledger: Ledger, state_dir: Path, lookup: Lookup) -> list[Rerun | Report]:
    """Kill what a crash left running and decide, for every generation left started, what to do."""
    decisions: list[Rerun | Report] = []
    for entry in ledger.interrupted():
        stop_orphan(ledger.get_state(f"hookpid:{entry.item_id}"))
        item, meta = lookup(entry.item_id)
        runs = attempts(ledger, entry.item_id)
        if (rerun_allowed(item) and runs <= MAX_RERUNS) or retry_allows(meta, runs):
            log.warning(
                "deployment %s (%s) was interrupted; its config or retry policy allows running it again (run %d)",
                entry.name,
                entry.item_id,
                runs + 1,
            )
            decisions.append(Rerun(entry.item_id, f"{INTERRUPTED}; re-run (run {runs + 1})"))
            continue
        log.warning("deployment %s (%s) was %s", entry.name, entry.item_id, INTERRUPTED)
        why = INTERRUPTED
        if rerun_allowed(item):
            why += f" ({runs} runs, the most rerun_on_interrupt allows is {MAX_RERUNS + 1})"
        decisions.append(
            Report(entry.item_id, item, meta, _interrupted_signal(state_dir, entry.item_id, why))
        )
    return decisions


def _interrupted_signal(state_dir: Path, item_id: str, why: str) -> wire.Signal:
    """FAILED with *why* and what the hook had printed before the interruption."""
    stdout, before = printed(state_dir, item_id)
    stderr = f"{why}\n" + (f"--- stderr before the interruption ---\n{before}" if before else "")
    return wire.Signal(status_code=INTERRUPTED_CODE, stdout=stdout, stderr=wire_caps.trim_stream(stderr))
