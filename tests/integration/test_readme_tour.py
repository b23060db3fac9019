"""The README's five-minute tour, extracted from README.md and run by bash as one pasted block.

It runs in a scratch directory holding links to this checkout's Makefile, pyproject.toml,
.venv and examples/ (so its `make install` finds the installed virtualenv and its paths
resolve as from the top directory), inside a network namespace with nothing but a
loopback, so the tour's fixed port 8770 is its own. bash runs with -e: every step must
succeed, as a user pasting it would see.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

from tests.support.netns import loopback_only
from tests.support.processes import ROOT

LINKED = ("Makefile", "pyproject.toml", ".venv", "examples")


def tour() -> str:
    """The first ```sh block after the heading "A five-minute tour" in README.md."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"^## A five-minute tour\n.*?^```sh\n(.*?)^```", text, re.S | re.M)
    assert found, "README.md has no ```sh block under '## A five-minute tour'"
    return found.group(1)


def test_readme_tour_runs_pasted_as_one_block_and_cleans_up(tmp_path: Path) -> None:
    """The tour, pasted whole, runs every step to success (no wait for the token file) and leaves nothing behind."""
    top, home, log = tmp_path / "top", tmp_path / "home", tmp_path / "tour.log"
    top.mkdir()
    home.mkdir()
    for name in LINKED:
        (top / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANNEAL_")} | {"HOME": str(home)}
    with loopback_only("tour") as netns, open(log, "wb") as out:
        bash = subprocess.Popen(
            ["ip", "netns", "exec", netns, "bash", "-e", "-x", "-c", tour()],
            cwd=top,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            status = bash.wait(1200)
        finally:
            _stop_leftovers(bash, top)
    said = log.read_text(errors="replace")
    assert 0 == status, said[-6000:]
    assert "hello from the backend (v2)" in said, "the frontend never saw the new backend"
    assert "hello from web-1 (CREATE)" in said, "the deployment on the tour's own server did not run"
    assert "anneal serve: stopped" in said
    assert set(LINKED) == {p.name for p in top.iterdir()}, "the tour left files behind"


def _stop_leftovers(bash: subprocess.Popen[bytes], top: Path) -> None:
    """After a failed tour: stop what it started (bash's process group, the background control plane).

    The group outlives bash when bash stopped at a failed step: the agent it started runs on.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(bash.pid, signal.SIGKILL)
    bash.wait()
    pid_file = top / "anneal-data" / "serve.pid"
    if pid_file.exists():
        subprocess.run(
            [str(ROOT / ".venv" / "bin" / "anneal"), "serve", "--stop", "--data-dir", str(pid_file.parent)],
            timeout=180,
            check=False,
        )
