"""One instance of a slow service for the whole run, shared by the xdist workers that need it.

The first worker to ask starts it and writes how to reach it to a state file in the run's temp
dir (every worker's basetemp is below it); the others attach to it. Both steps hold a file lock,
so a worker that asks while another is starting the service waits and then attaches. Each
worker counts itself a holder while it uses the service; the worker that started it stops it at
the end of its session, once no live worker holds it (bounded wait), and only that worker: the
service is its child process. Used for Keystone (tests/support/keystone.py)::

    share = Shared("keystone", run_dir(tmp_path_factory), start, stop, describe, attach)
    service = share.acquire()
    ...
    share.release()
    share.close()  # at the end of the session
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

T = TypeVar("T")


def run_dir(factory: pytest.TempPathFactory) -> Path:
    """The temp dir of this whole run: the parent of a worker's basetemp under xdist, else basetemp itself."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


class Shared(Generic[T]):
    """A service started once per run under *root*: *start* makes it in a fresh folder, *describe* says how
    to reach it (JSON), *attach* rebuilds a handle from that in another worker, *stop* stops it."""

    def __init__(
        self,
        name: str,
        root: Path,
        start: Callable[[Path], T],
        stop: Callable[[T], None],
        describe: Callable[[T], dict[str, Any]],
        attach: Callable[[dict[str, Any]], T],
    ) -> None:
        self.name, self.root = name, root
        self._start, self._stop, self._describe, self._attach = start, stop, describe, attach
        self._state = root / f"{name}.json"
        self._lock = root / f"{name}.lock"
        self.started: T | None = None  # set in the worker that started it: only it stops it

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any] | None]:
        """The state file's content (None: no live service), under the run-wide lock."""
        with self._lock.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(self._state.read_text()) if self._state.exists() else None
            yield state if state is not None and _alive(state["pid"]) else None

    def _write(self, state: dict[str, Any]) -> None:
        self._state.write_text(json.dumps(state))

    def acquire(self) -> T:
        """The run's service, started here if no worker has started it yet; this worker holds it until release()."""
        with self._locked() as found:
            state = found or self._begin()
            me = str(os.getpid())
            state["holders"][me] = state["holders"].get(me, 0) + 1
            self._write(state)
        if self.started is not None and state["pid"] == os.getpid():
            return self.started
        return self._attach(state["service"])

    def _begin(self) -> dict[str, Any]:
        """Start the service here (the lock held): its state, no holder yet."""
        self.started = self._start(self.root / f"{self.name}-{os.getpid()}")
        return {"pid": os.getpid(), "holders": {}, "service": self._describe(self.started)}

    def release(self) -> None:
        """This worker no longer uses the service."""
        with self._locked() as state:
            if state is not None:
                state["holders"][str(os.getpid())] -= 1
                self._write(state)

    def close(self, timeout: float = 900) -> None:
        """In the worker that started it: once no worker holds it (or after *timeout* s), stop it.

        The check and the stop hold the lock together, so no worker attaches in between."""
        if self.started is None:
            return
        deadline = time.monotonic() + timeout
        while True:
            with self._locked() as state:
                if state is None or not _held(state) or time.monotonic() > deadline:
                    self._state.unlink(missing_ok=True)
                    self._stop(self.started)
                    self.started = None
                    return
            time.sleep(1)


def _held(state: dict[str, Any]) -> bool:
    """Whether a live worker holds the service (a worker that crashed holding it holds it no more)."""
    return any(count > 0 and _alive(int(pid)) for pid, count in state["holders"].items())


def _alive(pid: int) -> bool:
    """Whether worker *pid* still runs (if the one that started the service died, the service is not to be trusted)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
