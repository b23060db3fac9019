"""The agent's configuration helpers (agent/config.py)."""

from __future__ import annotations

import os
from pathlib import Path

from agent.config import host_os


def test_host_os_is_os_releases_name_and_the_kernel(tmp_path: Path) -> None:
    """PRETTY_NAME (quotes stripped) and the kernel; without os-release, the kernel alone."""
    release = tmp_path / "os-release"
    release.write_text('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
    kernel = f"{os.uname().sysname} {os.uname().release}"
    assert f"Debian GNU/Linux 12 (bookworm) ({kernel})" == host_os(release)
    assert kernel == host_os(tmp_path / "absent")
