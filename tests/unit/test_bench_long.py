"""`make bench-long` and `bench/run.py --million` name scripts and options that exist (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("title", "argv"), run.LONG + run.MILLION, ids=lambda v: v if isinstance(v, str) else ""
)
def test_each_long_bench_parses_its_arguments(title: str, argv: list[str]) -> None:
    """Each long bench's script takes the options listed for it (argparse reads them before --help)."""
    script = ROOT / argv[0]
    assert script.is_file(), f"{title}: {argv[0]} does not exist"
    done = subprocess.run(
        [sys.executable, "-m", run.module(argv[0]), *argv[1:], "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{title}: {' '.join(argv)} refused: {done.stderr[-500:]}"
    assert "usage:" in done.stdout
