"""R09 with a fleet of simulated agents: the store blackholed during a rollout (bench/r09.py, small).

The same code as `bench/r09.py` (real Swift behind a blackholing TCP front, a real control
plane, simulated agents using the agent's own TempURL and back-off code), at CI size:
``R09_AGENTS`` agents (default 50), a 5 s outage, polls every 2 s, back-off cap 8 s.
Pass: 0 lost generations, each answered once; the requests the agents made during the
outage are within what the back-off allows. The catalogue run (1,000 agents; 5, 60 and
600 s) is `python bench/r09.py`; its figures are in docs/performance.md.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from bench import r09

pytestmark = pytest.mark.slow
AGENTS = int(os.environ.get("R09_AGENTS", "50"))


def test_r09_store_blackholed_during_a_rollout_loses_no_generation():
    args = r09.parse(["--agents", str(AGENTS), "--outages", "5", "--interval", "2", "--cap", "8"])
    results = asyncio.run(r09.run(args))
    print(f"\nR09 fleet: {results}")
    assert "CREATE_COMPLETE" == results["create"]
    (figures,) = results["outages"]
    assert "UPDATE_COMPLETE" == figures["stack"]
    assert 0 == figures["lost_generations"]
    assert 0 == figures["answered_other_than_once"]
    # A count, not a clock: in 5 s an agent whose polls fail waits 1-2, 2-4 s... so makes at most
    # 3 polls plus its signal attempts; the whole fleet stays under 5 requests per agent.
    assert figures["requests_per_s_during_outage"] * 5 <= 5 * AGENTS
