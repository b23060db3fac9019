"""What every tier shares: the `slow` mark by folder, and a fresh SQLite database (the harness is tests/support)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.database import Database, sqlite_database
from tests.support.leaks import trace_stream_writers
from tests.support.zygote import ZYGOTE

trace_stream_writers()  # an unclosed StreamWriter's warning names where it was made

#: The tiers that start real processes (control planes, agents, tools): marked `slow` here, in one place.
SLOW_TIERS = ("integration", "tools")
#: The longest modules (30 s to 3 min each on 4 workers), longest first. They run before all others:
#: `make test` hands whole modules to xdist workers in this order (--dist loadfile
#: --no-loadscope-reorder), so that no long module starts last and keeps the run waiting.
FIRST = (
    "integration/test_secret_taint.py",
    "integration/test_end_to_end.py",
    "integration/test_heat_api_cli.py",
    "integration/test_api_fuzz.py",
    "integration/test_keystone.py",
    "integration/test_keystone_flows.py",
    "integration/test_heat_api_views.py",
    "integration/test_fleet_processes.py",
    "integration/test_drift.py",
    "integration/test_durable_work.py",
    "integration/test_store_outage.py",
    "integration/test_packaging.py",
    "integration/test_overlapping_updates.py",
    "integration/test_transport_swift.py",
    "integration/test_engine_model.py",
    "integration/test_reboots.py",
    "integration/test_full_disk.py",
    "integration/test_url_expiry.py",
    "tools/test_puppet_hook.py",
    "integration/test_types.py",
    "integration/test_nested_templates.py",
    "integration/test_resource_group.py",
    "integration/test_database_races.py",
    "integration/test_agent_kills.py",
    "integration/test_cli.py",
    "integration/test_fleet_store_outage.py",
    "integration/test_stack_ops.py",
    "integration/test_swift_key_rotation.py",
    "integration/test_hook_examples.py",
    "integration/test_isolated_networks.py",
    "integration/test_restarts.py",
    "integration/test_fast_forward.py",
    "integration/test_scaling_group.py",
)


@pytest.fixture(autouse=True, scope="session")
def zygote_ended() -> Iterator[None]:
    """The worker's zygote (tests/support/zygote.py), if a test started it, ends with the session."""
    yield
    ZYGOTE.close()


@pytest.fixture(autouse=True, scope="module")
def collected_after_the_module() -> Iterator[None]:
    """A full garbage collection as each module ends: what it left unclosed is reported in its last
    test's teardown, not in whichever later test of the worker happens to start a collection."""
    yield
    gc.collect()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration and tests/tools `slow` (`-m "not slow"` runs the unit tier);
    put the modules of FIRST first, in its order (the others keep theirs)."""
    here = Path(__file__).parent
    slow = {here / tier for tier in SLOW_TIERS}
    for item in items:
        if slow.intersection(item.path.parents):
            item.add_marker(pytest.mark.slow)
    gone = [name for name in FIRST if not (here / name).is_file()]
    if gone:
        raise pytest.UsageError(f"tests/conftest.py: FIRST names modules that are gone: {gone}")
    rank = {here / name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(FIRST)))


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    """A fresh SQLite database with the schema in *tmp_path* (which also holds its keys), disposed of after."""
    async with sqlite_database(tmp_path) as db:
        yield db
