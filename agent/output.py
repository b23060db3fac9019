"""What a running hook has printed, kept on disk so that it survives a crash of the agent.

A hook's stdout and stderr are teed to ``<state dir>/output/<id>.out|.err`` while it runs,
and the built-in hooks copy their tool's stdout alone to ``<id>.tool-out`` as it comes;
recovery reads them back, and they are discarded once the result is recorded.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from agent import proctree, wire_caps

log = logging.getLogger(__name__)
OUTPUT_DIR = "output"


def output_paths(state_dir: Path, item_id: str) -> tuple[Path, Path]:
    """The files a hook's stdout and stderr are teed to while it runs."""
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


def printed(state_dir: Path, item_id: str) -> tuple[str, str]:
    """The tails of what a hook printed so far: its tool's stdout when a built-in hook copied it
    (else the hook's own stdout), and its stderr."""
    out_path, err_path = output_paths(state_dir, item_id)
    return read_tail(stdout_copy_path(state_dir, item_id)) or read_tail(out_path), read_tail(err_path)


def read_tail(path: Path) -> str:
    """The end of *path* as a signal carries it (trimmed to the stream cap); empty when unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 2 * wire_caps.MAX_STREAM_BYTES))
            data = f.read()
    except OSError:
        return ""
    return wire_caps.trim_stream(data.decode("utf-8", "replace"))


def hook_identity(pid: int) -> str:
    """The hook's pid and start time: recovery kills that very process, never a recycled pid."""
    return f"{pid} {proctree.start_time(pid) or ''}"


def open_tee(path: Path | None) -> BinaryIO | None:
    """*path* opened for a copy of hook output (0600, no symlink followed); None when it cannot be."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        return os.fdopen(fd, "wb", buffering=0)
    except OSError as e:
        log.warning("cannot keep a copy of hook output in %s: %s", path, e)
        return None


def close_quietly(sink: BinaryIO | None) -> None:
    """Close a copy's file; a close that fails (a full disk) loses only the copy."""
    if sink is not None:
        with contextlib.suppress(OSError):
            sink.close()


def teeing(
    sink: BinaryIO | None, path: Path | None, then: Callable[[bytes], None] | None
) -> Callable[[bytes], None] | None:
    """A stderr handler that also copies each chunk to *sink* (file *path*; the caller closes it)."""
    if sink is None:
        return then

    def feed(chunk: bytes) -> None:
        nonlocal sink
        if sink is not None:
            try:
                sink.write(chunk)
            except OSError as e:
                log.warning("copy of hook output to %s stopped: %s", path, e)
                close_quietly(sink)
                sink = None
        if then is not None:
            then(chunk)

    return feed
