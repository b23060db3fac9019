"""Waiting on an effect, bounded in time: the one polling loop the tests use."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T | None], what: str, timeout: float = 60, interval: float = 0.2) -> T:
    """Poll *check* until it returns something truthy, and return that; fail naming *what* after *timeout* s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise AssertionError(f"after {timeout:g} s: {what}")


def wait_file(path: Path, timeout: float = 60) -> None:
    """Wait until *path* exists (a hook's marker file), bounded in time."""
    wait_until(path.exists, f"{path} does not exist", timeout, interval=0.05)


def wait_log(path: Path, text: str, timeout: float = 60) -> None:
    """Wait until the log file *path* holds *text*, bounded in time."""
    wait_until(lambda: text in path.read_text(), f"{text!r} not in {path}", timeout)
