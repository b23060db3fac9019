"""A small full-able disk for the full-disk tests: a tmpfs the test mounts (root only), filled on demand."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: Small enough to fill in a moment, big enough for an agent's ledger and a few hooks' output.
SIZE = "4m"


def mount_tmpfs(path: Path) -> None:
    """Mount a SIZE tmpfs on the new directory *path*; fail naming why when this is not root."""
    path.mkdir()
    run = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, f"R24 needs to mount a small tmpfs (root): {run.stderr.strip()}"


def fill(disk: Path, leave: int) -> None:
    """Fill *disk* completely (the file `filler`), then give back *leave* bytes."""
    filler = disk / "filler"
    with open(filler, "ab", buffering=0) as f:
        chunk = b"\0" * 65536
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))


def unmount(path: Path) -> None:
    """Unmount the tmpfs on *path* (quietly: the test may have failed before it mounted)."""
    subprocess.run(["umount", str(path)], check=False)
