"""Atomic, private file writes: temp file, fsync, rename."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace *path* with *data* so that a crash leaves the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def lock_state_dir(state_dir: Path) -> int:
    """Hold an exclusive lock on the state dir for this process's life; OSError if taken."""
    private_dir(state_dir)
    fd = os.open(state_dir / "agent.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd
