"""The full-disk condition (agent/diskfull.py): recognised, waited out, written where `status` reads it."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import diskfull
from agent.diskfull import DiskFullError, DiskWatch


class QuickWatch(DiskWatch):
    """Retries at once: the tests check what happens, not how long the backoff is."""

    @staticmethod
    def delay(tries: int) -> float:
        return 0.0


def _enospc(path: str = "/state/x") -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def test_full_disk_errors_are_recognised_and_others_are_not():
    """ENOSPC, EDQUOT, SQLite's full-disk error and errors caused by them count; EIO and the rest do not."""
    assert diskfull.is_full(_enospc())
    assert diskfull.is_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert diskfull.is_full(sqlite3.OperationalError("database or disk is full"))
    shm = sqlite3.OperationalError("disk I/O error")
    shm.sqlite_errorcode = sqlite3.SQLITE_IOERR_SHMSIZE  # what opening a WAL database on a full disk gives
    assert diskfull.is_full(shm)
    try:
        try:
            raise _enospc()
        except OSError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        assert diskfull.is_full(e)
    assert not diskfull.is_full(OSError(errno.EIO, "Input/output error"))
    assert not diskfull.is_full(sqlite3.OperationalError("database is locked"))
    assert not diskfull.is_full(ValueError("no"))


def test_retry_keeps_trying_until_the_write_goes_through(tmp_path: Path) -> None:
    """Two writes fail with ENOSPC, the third succeeds: its result is returned and the condition clears."""
    changes: list[bool] = []
    watch = QuickWatch(tmp_path, on_change=lambda: changes.append(watch.condition is not None))
    tries: Iterator[OSError | str] = iter([_enospc(), _enospc(), "written"])

    def write() -> str:
        step = next(tries)
        if isinstance(step, OSError):
            raise step
        return step

    assert "written" == asyncio.run(watch.retry("record the result of deployment web", write))
    assert watch.condition is None
    assert [True, False] == changes  # reported when it began and when it ended


def test_retry_lets_other_errors_through(tmp_path: Path) -> None:
    """A write failing for another reason is not waited on: the error reaches the caller."""

    def write() -> None:
        raise OSError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):
        asyncio.run(QuickWatch(tmp_path).retry("keep the document", write))


def test_one_pass_gives_up_with_a_line_naming_the_state_dir_and_the_write(tmp_path: Path) -> None:
    """Without waiting (anneal-agent once) the first full-disk failure ends it with a clear message."""
    watch = QuickWatch(tmp_path, wait=False)

    def write() -> None:
        raise _enospc(str(tmp_path / "ledger.sqlite-wal"))

    with pytest.raises(DiskFullError) as caught:
        asyncio.run(watch.retry("record the result of deployment web (abc)", write))
    text = str(caught.value)
    assert f"state dir {tmp_path} is full" in text
    assert "No space left on device" in text and "ledger.sqlite-wal" in text
    assert text.endswith("could not record the result of deployment web (abc)")


def test_condition_is_written_where_status_reads_it_and_cleared(tmp_path: Path) -> None:
    """The running agent's condition is in condition.json (fixed size); status reads it; cleared, it is gone."""
    watch = QuickWatch(tmp_path)
    watch.open()
    assert diskfull.read_condition(tmp_path) is None
    watch.note("keep document serial 7", _enospc())
    assert diskfull.CONDITION_BYTES == (tmp_path / diskfull.CONDITION_FILE).stat().st_size
    seen = diskfull.read_condition(tmp_path)
    assert seen is not None and "could not keep document serial 7" in seen["message"]
    assert str(tmp_path) == seen["state_dir"]
    watch.wrote()  # a ledger write went through: the disk has room again
    assert diskfull.read_condition(tmp_path) is None
    watch.close()


def test_condition_of_an_agent_that_is_gone_is_not_shown(tmp_path: Path) -> None:
    """condition.json left by a dead agent (its pid no longer runs) does not claim a full disk now."""
    dead = subprocess_pid_that_exited()
    old = {"pid": dead, "disk_full": {"message": "old", "since": 0, "tries": 1}}
    (tmp_path / diskfull.CONDITION_FILE).write_text(json.dumps(old))
    assert diskfull.read_condition(tmp_path) is None


def test_room_for_waits_while_less_than_the_minimum_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No hook starts below MIN_FREE_BYTES free; it starts once space is back."""
    free = iter([1024, 2048, diskfull.MIN_FREE_BYTES])
    monkeypatch.setattr(diskfull, "free_bytes", lambda path: next(free))
    watch = QuickWatch(tmp_path)
    notes: list[str] = []
    watch.on_change = lambda: notes.append(watch.condition["message"] if watch.condition else "")
    asyncio.run(watch.room_for("start deployment web"))
    assert watch.condition is None
    assert "could not start deployment web: 1024 bytes free" in notes[0] and "" == notes[1]


def subprocess_pid_that_exited() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_give_up_turns_a_full_disk_into_one_clear_error_and_leaves_others(tmp_path: Path) -> None:
    """For `once`: ENOSPC becomes DiskFullError naming the state dir; another error is not its business."""
    watch = QuickWatch(tmp_path, wait=False)
    assert watch.give_up(ValueError("bad document")) is None
    full = watch.give_up(_enospc())
    assert isinstance(full, DiskFullError) and f"state dir {tmp_path} is full" in str(full)
    assert watch.condition is not None  # noted, so the heartbeat sent before exiting carries it


def test_unless_full_drops_only_a_write_that_finds_the_disk_full(tmp_path: Path) -> None:
    """A write that may be lost (a hook's pid) is dropped on ENOSPC, never on another error."""
    watch = QuickWatch(tmp_path)

    def full() -> None:
        raise _enospc()

    watch.unless_full("keep hook pid 1", full)

    def broken() -> None:
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(OSError, match="Input/output"):
        watch.unless_full("keep hook pid 1", broken)
