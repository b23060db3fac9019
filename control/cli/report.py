"""How `--wait` and `--follow` report: lines of text with a progress line, or JSON lines.

Text: each event on stdout; the progress (done/total, failures, rate, ETA) on stderr, one
line rewritten in place on a terminal, plain lines (when it changed, at most every
PLAIN_EVERY seconds, and once at the end) when not. JSON (``-f json``): one object per
line on stdout, its ``kind`` one of started, event, progress, result.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from control.cli.output import readable_times, when

#: Without a terminal, a progress line at most this often (seconds).
PLAIN_EVERY = 5.0


@dataclass
class Progress:
    """Counts of the running traversal and what they say about the rest."""

    total: int = 0
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    failed: int = 0
    running: int = 0

    def update(self, counts: dict[str, int], deleting: bool) -> bool:
        """Take the server's counts (``progress`` of the stack summary); True when they changed."""
        before = (self.done, self.failed, self.running)
        self.total = max(self.total, counts.get("total", 0), counts["resources"])
        if deleting:  # deleted rows are gone: what is no longer there is done
            self.done = max(0, self.total - counts["resources"])
        else:
            self.done = counts["done"]
        self.failed, self.running = counts["failed"], counts["in_progress"]
        return before != (self.done, self.failed, self.running)

    def rate(self) -> float:
        """Resources finished per second since the wait began."""
        return (self.done + self.failed) / max(time.monotonic() - self.started, 1e-3)

    def eta(self) -> float | None:
        left, rate = self.total - self.done - self.failed, self.rate()
        return left / rate if rate > 0 and left >= 0 else None

    def as_dict(self) -> dict[str, Any]:
        eta = self.eta()
        return {
            "done": self.done,
            "total": self.total,
            "failed": self.failed,
            "in_progress": self.running,
            "rate": round(self.rate(), 3),
            "eta_seconds": None if eta is None else round(eta, 1),
        }

    def line(self) -> str:
        eta = self.eta()
        left = "?" if eta is None else _duration(eta)
        return (
            f"{self.done}/{self.total} done, {self.failed} failed, {self.running} running, "
            f"{self.rate():.1f}/s, ETA {left}"
        )


def _duration(seconds: float) -> str:
    s = round(seconds)
    return (
        f"{s // 3600}h{s % 3600 // 60:02d}m"
        if s >= 3600
        else f"{s // 60}m{s % 60:02d}s"
        if s >= 60
        else f"{s}s"
    )


class Text:
    """Events as lines on stdout, progress on stderr (a live line on a terminal)."""

    def __init__(self, err: TextIO | None = None) -> None:
        # The raw stream: the progress line moves the cursor (the text in it is numbers and names).
        self._err = err or sys.__stderr__ or sys.stderr
        self._live = self._err.isatty()
        self._shown = ""
        self._at = 0.0

    def started(self, stack: dict[str, Any], what: str) -> None:
        print(f"stack {stack['name']} {what} (version {stack['version']})")
        for warning in stack.get("warnings", []):
            print(f"warning: {warning}")

    def event(self, ev: dict[str, Any]) -> None:
        self._clear()
        reason = f": {ev['reason']}" if ev["reason"] and ev["reason"] != "state changed" else ""
        print(
            f"{when(ev['timestamp'])}  {ev['resource_name']:<24} {ev['action']}_{ev['status']}{reason}",
            flush=True,
        )
        self._redraw()

    def progress(self, progress: Progress, changed: bool, final: bool = False) -> None:
        text = f"progress: {progress.line()}"
        if self._live:  # the line is rewritten in place; the last one stays
            self._shown = text
            self._clear(force=True)
            self._redraw()
            if final:
                self._err.write("\n")
                self._shown = ""
        elif final or (changed and time.monotonic() - self._at >= PLAIN_EVERY):
            self._at = time.monotonic()
            print(text, file=self._err, flush=True)

    def result(self, payload: dict[str, Any]) -> None:
        self._clear()
        self._shown = ""

    def _clear(self, force: bool = False) -> None:
        if self._live and (self._shown or force):
            self._err.write("\r\x1b[K")
            self._err.flush()

    def _redraw(self) -> None:
        if self._live and self._shown:
            self._err.write(self._shown)
            self._err.flush()


class JsonLines:
    """One JSON object per line on stdout, for a program to read as it happens."""

    def started(self, stack: dict[str, Any], what: str) -> None:
        self._emit({"kind": "started", "what": what, "stack": readable_times(stack, precise=True)})

    def event(self, ev: dict[str, Any]) -> None:
        self._emit({"kind": "event", **readable_times(ev, precise=True)})

    def progress(self, progress: Progress, changed: bool, final: bool = False) -> None:
        if changed or final:
            self._emit({"kind": "progress", **progress.as_dict()})

    def result(self, payload: dict[str, Any]) -> None:
        self._emit({"kind": "result", **payload})

    def _emit(self, obj: dict[str, Any]) -> None:
        print(json.dumps(obj, sort_keys=True, default=str), flush=True)


Reporter = Text | JsonLines


def reporter(fmt: str) -> Reporter:
    return JsonLines() if fmt == "json" else Text()
