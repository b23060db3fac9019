"""Fixtures of the integration tier: a control plane, PostgreSQL, Swift (the harness is tests/support)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.pg import Postgres, running_postgres
from tests.support.swift import Swift, missing, start_swift


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One throw-away PostgreSQL cluster for the whole run; each test takes a fresh database."""
    with running_postgres() as pg:
        yield pg


@pytest.fixture(params=["sqlite", "postgresql"])
def db_args(request: pytest.FixtureRequest) -> list[str]:
    """`anneal serve` arguments for each database: SQLite in the data dir, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return []
    pg: Postgres = request.getfixturevalue("postgres")
    return ["--db", pg.new_database()]


@pytest.fixture
def control_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    cp = start_control_plane(tmp_path)
    yield cp
    stop_control_plane(cp)


@pytest.fixture(scope="module")
def swift_server() -> Iterator[Swift]:
    """One Swift all-in-one per test module; fails (not skips) when `make tools` was not run."""
    why = missing()
    if why:
        pytest.fail(why)
    root = Path(tempfile.mkdtemp(prefix="anneal-swift-"))
    swift = start_swift(root)
    try:
        yield swift
    finally:
        swift.stop()
        shutil.rmtree(root, ignore_errors=True)
