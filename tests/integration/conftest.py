"""Fixtures of the integration tier: a control plane, PostgreSQL, Swift, Keystone (the harness is tests/support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from control.settings import async_url
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.keystone import KeystoneShare, shared_keystone
from tests.support.pg import Postgres, running_postgres
from tests.support.swift import Swift, running_swift


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


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind, as its async URL (the upgrade tests build old schemas in it)."""
    if request.param == "sqlite":
        return async_url(f"sqlite:///{tmp_path / 'anneal.db'}")
    pg: Postgres = request.getfixturevalue("postgres")
    return async_url(pg.new_database())


@pytest.fixture
def control_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    cp = start_control_plane(tmp_path)
    yield cp
    stop_control_plane(cp)


@pytest.fixture(scope="session")
def swift_server() -> Iterator[Swift]:
    """One Swift all-in-one per pytest worker, for the modules that only make their own containers.

    test_store_outage.py and test_swift_key_rotation.py stop its proxy or rotate its keys:
    they override this fixture with a module-scoped Swift of their own.
    """
    with running_swift() as swift:
        yield swift


@pytest.fixture(scope="session")
def keystone_share(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeystoneShare]:
    """The run's one Keystone: the first worker that needs it starts it, the others attach; the worker that
    started it stops it at the end of its session, once no other worker holds it."""
    share = shared_keystone(tmp_path_factory)
    yield share
    share.close()
