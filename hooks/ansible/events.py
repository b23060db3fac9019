"""What ansible-runner's artifacts say about a run: rc, failed tasks, ``set_stats`` data."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
_FAILED = {"runner_on_failed": "failed", "runner_on_unreachable": "unreachable"}
#: A task's message is cut to this many characters in the failure line.
MAX_MESSAGE = 2000


@dataclass(frozen=True)
class RunReport:
    rc: int | None = None
    #: One line per failed task: which task, on which host, and its message.
    failures: list[str] = field(default_factory=list)
    #: The data the play gave to ``set_stats`` (aggregated, per-run).
    stats: dict[str, Any] = field(default_factory=dict)
    #: Tasks that changed something (or, under ``--check``, would have), over all hosts.
    changed: int = 0


def read_report(artifacts: Path) -> RunReport:
    """Read ``rc`` and ``job_events/*.json`` of one run; missing files give an empty report."""
    rc = _read_rc(artifacts / "rc")
    failures: list[str] = []
    stats: dict[str, Any] = {}
    changed = 0
    events = artifacts / "job_events"
    paths = sorted(events.glob("*.json"), key=_counter) if events.is_dir() else []
    for path in paths:
        try:
            event = json.loads(path.read_bytes())
        except (OSError, ValueError) as e:
            logger.warning("cannot read %s: %s", path, e)
            continue
        data = event.get("event_data") or {}
        kind = event.get("event")
        if kind in _FAILED and not data.get("ignore_errors"):
            failures.append(_failure_line(_FAILED[kind], data))
        elif kind == "playbook_on_stats":
            if isinstance(data.get("artifact_data"), dict):
                stats.update(data["artifact_data"])
            counts = data.get("changed")
            changed += (
                sum(n for n in counts.values() if isinstance(n, int)) if isinstance(counts, dict) else 0
            )
    return RunReport(rc, failures, stats, changed)


def _counter(path: Path) -> int:
    head = path.name.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def _read_rc(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _failure_line(how: str, data: dict[str, Any]) -> str:
    res = data.get("res")
    res = res if isinstance(res, dict) else {}
    message = str(res.get("msg") or res.get("stderr") or "").strip()[:MAX_MESSAGE]
    line = f"task {data.get('task', '?')!r} {how} on {data.get('host', '?')}"
    return f"{line}: {message}" if message else line
