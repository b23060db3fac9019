"""bench/scale_agents.py: the simulated agents treat a refused signal as the agent's outbox does."""

from __future__ import annotations

import asyncio
import collections

from sqlalchemy.exc import OperationalError

from bench.scale_agents import SimAgents, status_of
from control.errors import StaleSignalError


def test_each_refusal_maps_to_the_status_the_signal_route_answers() -> None:
    """A locked database is a 503, a stale generation a 409, anything unexpected a 500."""
    locked = OperationalError("UPDATE deployments", {}, Exception("database is locked"))
    assert 503 == status_of(locked)
    assert 409 == status_of(StaleSignalError("generation 1 is stale"))
    assert 500 == status_of(RuntimeError("a bug"))


def test_busy_and_500_are_sent_again_and_a_stale_signal_is_dropped() -> None:
    """Locked once and a 500 once: each taken on its second try; a stale one refused for good, never resent."""
    tries: collections.Counter[str] = collections.Counter()

    async def signal(dep_id: str, generation: int, sig: str) -> None:
        tries[dep_id] += 1
        if dep_id == "stale":
            raise StaleSignalError(f"generation {generation} is stale")
        if tries[dep_id] == 1 and dep_id == "busy":
            raise OperationalError("UPDATE deployments", {}, Exception("database is locked"))
        if tries[dep_id] == 1 and dep_id == "bug":
            raise RuntimeError("a bug")

    async def run() -> SimAgents:
        agents = SimAgents(signal, workers=2)
        for dep_id in ("busy", "bug", "stale", "fine"):
            agents.put((dep_id, 2, "sig"))
        for _ in range(100):  # the first backoff is 1-2 s
            await asyncio.sleep(0.05)
            if agents.counts["signalled"] == 3 and not agents.pending():
                break
        await agents.close()
        return agents

    agents = asyncio.run(run())
    assert {"signalled": 3, "retries": 2, "final": 1, "gave_up": 0} == agents.counts
    assert {"busy": 2, "bug": 2, "stale": 1, "fine": 1} == dict(tries)
    assert {503, 500, 409} == {int(reason.split()[0]) for reason in agents.reasons}
