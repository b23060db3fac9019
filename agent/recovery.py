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
  had written: hooks' stdout and stderr are teed to ``<state dir>/output/<id>.out|.err``
  while they run, and the built-in hooks stream their tool's output to their stderr and
  its stdout alone to ``<id>.tool-out`` as it comes, so what was printed survives the
  crash (the tool's stdout in ``deploy_stdout``, everything in ``deploy_stderr``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agent import proctree, wire

if TYPE_CHECKING:
    from agent.loop import Agent

log = logging.getLogger(__name__)
OUTPUT_DIR = "output"
#: Runs of one generation after interruptions before it is reported FAILED instead.
MAX_RERUNS = 3
INTERRUPTED = "interrupted by agent restart"
#: Status code of an interrupted run (as if killed by SIGKILL).
INTERRUPTED_CODE = 137


def output_paths(state_dir: Path, item_id: str) -> tuple[Path, Path]:
    d = state_dir / OUTPUT_DIR
    d.mkdir(mode=0o700, exist_ok=True)
    safe = "".join(c for c in item_id if c.isalnum() or c in "-_")
    return d / f"{safe}.out", d / f"{safe}.err"


def stdout_copy_path(state_dir: Path, item_id: str) -> Path:
    """Where built-in hooks copy their tool's stdout as it comes (``ANNEAL_HOOK_STDOUT_COPY``)."""
    out, _ = output_paths(state_dir, item_id)
    return out.with_suffix(".tool-out")


def discard_output(state_dir: Path, item_id: str) -> None:
    for path in (*output_paths(state_dir, item_id), stdout_copy_path(state_dir, item_id)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _read_tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 2 * wire.MAX_STREAM_BYTES))
            data = f.read()
    except OSError:
        return ""
    return wire.trim_stream(data.decode("utf-8", "replace"))


def hook_identity(pid: int) -> str:
    return f"{pid} {proctree.start_time(pid) or ''}"


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


def attempts(agent: Agent, item_id: str) -> int:
    return int(agent.ledger.get_state(f"runs:{item_id}", "0") or 0)


def recover(agent: Agent) -> None:
    """Settle every generation a crash left started: re-run it (if allowed) or report it FAILED."""
    for entry in agent.ledger.interrupted():
        stop_orphan(agent.ledger.get_state(f"hookpid:{entry.item_id}"))
        item, meta = agent._lookup(entry.item_id)
        runs = attempts(agent, entry.item_id)
        if rerun_allowed(item) and runs <= MAX_RERUNS:
            log.warning(
                "deployment %s (%s) was interrupted; rerun_on_interrupt is set: running it again (run %d)",
                entry.name,
                entry.item_id,
                runs + 1,
            )
            agent.ledger.mark_received(entry.item_id, f"{INTERRUPTED}; re-run (run {runs + 1})")
            continue
        log.warning("deployment %s (%s) was %s", entry.name, entry.item_id, INTERRUPTED)
        out_path, err_path = output_paths(agent.state_dir, entry.item_id)
        before = _read_tail(err_path)
        why = INTERRUPTED
        if rerun_allowed(item):
            why += f" ({runs} runs, the most rerun_on_interrupt allows is {MAX_RERUNS + 1})"
        stderr = f"{why}\n" + (f"--- stderr before the interruption ---\n{before}" if before else "")
        # The tool's own stdout when a built-in hook copied it, else whatever the hook printed.
        stdout = _read_tail(stdout_copy_path(agent.state_dir, entry.item_id)) or _read_tail(out_path)
        signal_ = wire.Signal(status_code=INTERRUPTED_CODE, stdout=stdout, stderr=wire.trim_stream(stderr))
        agent._finish(entry.item_id, item, meta, signal_, note="interrupted")
        discard_output(agent.state_dir, entry.item_id)
