"""A stateful property test of the engine against a simple model (hypothesis).

Random templates (servers, deployments, dependencies), random overlapping updates,
simulated agents whose signals go through the real HTTP API (CFN_SIGNAL URLs of
the control plane's aiohttp app, on loopback), delayed and duplicated signals, and
control-plane crashes: the app is torn down mid-flight (every engine task
cancelled at whatever await it was in, its transaction rolled back; the database's
write lock must then be free, as after a kill -9) and a fresh
Runtime and Engine start on the same SQLite database and port. The simulated
agents read their deployments from the database (the document's source; the
signed document transport is tested elsewhere).

The invariants of the reliability catalogue (../shared/reference/reliability.md §0), checked
on every step:
- I1: a server's serial never goes down; a deployment's generation never goes down;
- a generation, once published, is never re-issued (its derived config id never changes)
  and no agent runs one twice;
- I5: a signal for an older generation is refused (409); a repeated one is absorbed;
- I7: after the last crash, the stack converges: once agents stop failing, a final
  update completes and every deployment ran the final inputs.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from control.engine import slices
from tests.support.inprocess import Plane

EXAMPLES, STEPS = 15, 30
#: Bound (seconds) on one step's work, so a hang fails clearly.
STEP_BOUND = 300


def template(servers: int, deps: list[int | None]) -> str:
    """*deps[i]*: the index of the deployment deployment i depends on (or None)."""
    lines = [
        "heat_template_version: 2018-08-31",
        "parameters:",
        "  rev: {type: number, default: 0}",
        "resources:",
        "  cfg:",
        "    type: OS::Heat::SoftwareConfig",
        "    properties: {group: script, config: 'true', inputs: [{name: REV}], outputs: [{name: out}]}",
    ]
    for s in range(servers):
        lines.append(f"  srv{s}: {{type: OS::Heat::DeployedServer, properties: {{name: model-srv{s}}}}}")
    for i, after in enumerate(deps):
        dep = f", depends_on: [d{after}]" if after is not None else ""
        lines.append(
            f"  d{i}: {{type: OS::Heat::SoftwareDeployment{dep}, properties: {{config: {{get_resource: cfg}}, "
            f"server: {{get_resource: srv{i % servers}}}, input_values: {{REV: {{get_param: rev}}}}, "
            f"signal_transport: CFN_SIGNAL}}}}"
        )
    return "\n".join(lines) + "\n"


def _input(item: dict[str, Any], name: str) -> Any:
    return next((i.get("value") for i in item.get("inputs", []) if i["name"] == name), None)


@pytest.mark.parametrize("slice_size", [None, 2], ids=["one-transaction-steps", "sliced-steps"])
def test_engine_against_a_model(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, slice_size: int | None
) -> None:
    """*slice_size* 2: every step of a stack of more than 2 resources commits every 2 resources
    it acts on (control/engine/slices.py ``Slices``, built for 50,000-deployment stacks), so the
    crashes land between slices too."""
    slice_commits = {"n": 0, "light": 0}
    if slice_size is not None:
        monkeypatch.setattr(slices, "SLICE", slice_size)
        commit = slices.Slices.commit

        async def counted(self: slices.Slices) -> None:
            acted = self.acted
            await commit(self)
            slice_commits["n"] += bool(self.sliced and acted)
            slice_commits["light"] += bool(self.light and acted)  # holding light records, not rows

        monkeypatch.setattr(slices.Slices, "commit", counted)
    stats = {"examples": 0, "steps": 0, "crashes": 0, "runs": 0, "stale_refused": 0, "duplicates": 0}

    class EngineModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.plane = Plane(self.loop, tmp_path_factory.mktemp("model"))
            # Sliced: every walk commits every slice_size resources, whatever its size; else once per step.
            self.plane.settings = dataclasses.replace(self.plane.settings, step_slice=slice_size or 0)
            self.run(self.plane.start())
            self.rev = 0
            self.executed: set[tuple[str, int]] = set()  # the agents' ledgers
            self.items: dict[tuple[str, int], str] = {}  # (deployment, generation) -> derived config id
            self.generation: dict[str, int] = {}
            self.serial: dict[str, int] = {}
            self.queue: list[tuple[str, str, int, dict[str, Any]]] = []  # (url, dep, gen, body)
            self.delivered: list[tuple[str, str, int, dict[str, Any]]] = []
            self.violations: list[str] = []
            stats["examples"] += 1

        def run(self, coro: Any) -> Any:
            """Run one step's work on the plane's loop, bounded: a hang is a failure naming the step."""
            name = getattr(coro, "__qualname__", repr(coro))
            try:
                return self.loop.run_until_complete(asyncio.wait_for(coro, STEP_BOUND))
            except TimeoutError:
                raise AssertionError(f"{name} did not finish in {STEP_BOUND} s") from None

        @initialize(servers=st.integers(1, 2), shape=st.lists(st.booleans(), min_size=1, max_size=4))
        def create(self, servers: int, shape: list[bool]) -> None:
            deps = [i - 1 if (chained and i) else None for i, chained in enumerate(shape)]
            self.text = template(servers, deps)
            status, body = self.run(
                self.plane.call(
                    "POST", "/v1/stacks", {"name": "model", "template": self.text, "parameters": {"rev": 0}}
                )
            )
            assert 201 == status, body

        @rule()
        def update(self) -> None:
            stats["steps"] += 1
            self.rev += 1
            status, body = self.run(
                self.plane.call(
                    "PUT", "/v1/stacks/model", {"template": self.text, "parameters": {"rev": self.rev}}
                )
            )
            if status != 202:
                self.violations.append(f"update refused: {status} {body}")

        @rule(fail=st.sampled_from([False, False, False, True]), wait=st.floats(0, 0.1))
        def agents_run(self, fail: bool, wait: float) -> None:
            """Every agent runs what its document holds and it has not run; signals are queued."""
            stats["steps"] += 1
            self.run(asyncio.sleep(wait))  # let the engine step
            for dep in self.run(self.plane.deployments()):
                key = (dep.id, dep.generation)
                if key in self.executed or dep.status != "IN_PROGRESS":
                    continue
                self.executed.add(key)
                stats["runs"] += 1
                body = {
                    "deploy_status_code": 1 if fail else 0,
                    "deploy_stdout": "",
                    "deploy_stderr": "",
                    "out": f"rev {_input(dep.item, 'REV')}",
                }
                self.queue.append((str(_input(dep.item, "deploy_signal_id")), dep.id, dep.generation, body))

        @rule(pick=st.integers(0, 1000))
        def deliver(self, pick: int) -> None:
            """Deliver one queued signal, in any order (signals of a server may overtake each other)."""
            stats["steps"] += 1
            if self.queue:
                self._deliver(self.queue.pop(pick % len(self.queue)))

        def _deliver(self, sig: tuple[str, str, int, dict[str, Any]]) -> None:
            url, dep_id, gen, body = sig
            status, answer = self.run(self.plane.post_signal(url, body))
            if status == 409:
                stats["stale_refused"] += 1
                # The engine steps between rules, so read the generation now (it never goes down).
                current = self.run(self.plane.generation(dep_id))
                if current is not None and gen >= current:
                    self.violations.append(
                        f"signal for current generation {gen} of {dep_id} refused: {answer}"
                    )
            elif status == 200:
                if answer.get("duplicate"):
                    stats["duplicates"] += 1
                self.delivered.append(sig)
            elif status == 404:
                pass  # the deployment was replaced and removed meanwhile
            else:
                self.violations.append(f"signal answered {status} {answer}")

        @rule()
        def duplicate(self) -> None:
            """An agent re-sends a signal already acknowledged (its outbox retried)."""
            stats["steps"] += 1
            if self.delivered:
                self._deliver(self.delivered[-1])

        @rule()
        def crash(self) -> None:
            stats["steps"] += 1
            stats["crashes"] += 1
            self.run(self.plane.crash())

        @invariant()
        def monotonic_and_never_reissued(self) -> None:
            for dep in self.run(self.plane.deployments()):
                key = (dep.id, dep.generation)
                if self.generation.get(dep.id, 0) > dep.generation:
                    self.violations.append(f"generation of {dep.id} went down")
                self.generation[dep.id] = dep.generation
                known = self.items.setdefault(key, str(dep.item_id))
                if known != dep.item_id:
                    self.violations.append(f"generation {key} re-issued as {dep.item_id} (was {known})")
            for sid, serial in self.run(self.plane.serials()).items():
                if self.serial.get(sid, 0) > serial:
                    self.violations.append(f"serial of {sid} went down")
                self.serial[sid] = serial

        def teardown(self) -> None:
            try:
                self._converge()
            finally:
                self.run(self.plane.stop())
                self.loop.close()
                assert [] == self.violations[:10]

        def _converge(self) -> None:
            """Agents stop failing; every queued signal lands; a final update must complete everywhere."""
            for sig in self.queue:
                self._deliver(sig)
            self.queue = []
            self.rev += 1
            status, body = self.run(
                self.plane.call(
                    "PUT", "/v1/stacks/model", {"template": self.text, "parameters": {"rev": self.rev}}
                )
            )
            if status != 202:
                self.violations.append(f"final update refused: {status} {body}")
                return
            for _ in range(400):
                self.agents_run(False, 0.05)
                for sig in self.queue:
                    self._deliver(sig)
                self.queue = []
                status, stack = self.run(self.plane.call("GET", "/v1/stacks/model"))
                if not stack["status"].endswith("IN_PROGRESS"):
                    break
            if stack["status"] != "UPDATE_COMPLETE":
                self.violations.append(f"did not converge: {stack['status']} {stack['status_reason']}")
                return
            for dep in self.run(self.plane.deployments()):
                if _input(dep.item, "REV") != self.rev or dep.status != "COMPLETE":
                    self.violations.append(
                        f"{dep.resource_name} at rev {_input(dep.item, 'REV')} "
                        f"{dep.status}, wanted {self.rev} COMPLETE"
                    )

    EngineModel.TestCase.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    EngineModel.TestCase().runTest()
    print(f"\nengine model: {stats}, slice commits: {slice_commits}")
    assert stats["crashes"] > 0 and stats["runs"] > 0
    assert slice_size is None or (slice_commits["n"] > 0 and slice_commits["light"] > 0)
