"""A big stack's sliced step (control/engine/slices.py) when a group's own check fails.

The slice size is lowered to 2 in this process (``slices.SLICE``), so a stack of five
resources is stepped the way a stack of more than 2,000 is: holding light records, not rows.
The app runs in the test's process (tests/support/inprocess.py); signals go through its
real HTTP API.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from control.engine import light, slices
from tests.support.inprocess import Plane

TEMPLATE = """
heat_template_version: 2018-08-31
resources:
  srv0: {type: OS::Heat::DeployedServer, properties: {name: sliced-srv0}}
  srv1: {type: OS::Heat::DeployedServer, properties: {name: sliced-srv1}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: 'true'}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: cfg}
      servers: {a: {get_resource: srv0}, b: {get_resource: srv1}}
      signal_transport: CFN_SIGNAL
  after:
    type: OS::Heat::SoftwareDeployment
    depends_on: [group]
    properties: {config: {get_resource: cfg}, server: {get_resource: srv0}, signal_transport: CFN_SIGNAL}
"""


def _signal_url(item: dict[str, Any]) -> str:
    return str(next(i["value"] for i in item["inputs"] if i["name"] == "deploy_signal_id"))


async def _scenario(plane: Plane) -> dict[str, Any]:
    status, body = await plane.call("POST", "/v1/stacks", {"name": "sliced", "template": TEMPLATE})
    assert 201 == status, body
    members: list[Any] = []
    for _ in range(200):  # the group's two members are published (bounded: ~20 s)
        members = await plane.deployments()
        if len(members) == 2:
            break
        await asyncio.sleep(0.1)
    assert 2 == len(members), members
    for code, dep in zip((0, 3), sorted(members, key=lambda d: d.id), strict=True):
        status, body = await plane.post_signal(
            _signal_url(dep.item), {"deploy_status_code": code, "deploy_stdout": "", "deploy_stderr": "x"}
        )
        assert status in (200, 202), body
    for _ in range(300):  # the stack settles (bounded: ~30 s)
        status, stack = await plane.call("GET", "/v1/stacks/sliced")
        if not str(stack.get("status")).endswith("_IN_PROGRESS"):
            return dict(stack)
        await asyncio.sleep(0.1)
    raise AssertionError(f"the stack did not settle: {stack}")


def test_a_group_failing_its_check_in_a_sliced_step_fails_the_stack_by_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's failure reaches the stack as the group's reason, not as an engine internal error."""
    monkeypatch.setattr(slices, "SLICE", 2)
    light_steps = {"n": 0}
    rows = slices.Slices.rows

    async def counted(self: slices.Slices) -> list[light.Row]:
        found = await rows(self)
        light_steps["n"] += self.light
        return found

    monkeypatch.setattr(slices.Slices, "rows", counted)
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    try:
        loop.run_until_complete(plane.start())
        stack = loop.run_until_complete(asyncio.wait_for(_scenario(plane), 120))
        _, resources = loop.run_until_complete(plane.call("GET", "/v1/stacks/sliced/resources"))
        _, events = loop.run_until_complete(plane.call("GET", "/v1/stacks/sliced/events"))
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    assert light_steps["n"] > 0, "no step held light records: the sliced path was not taken"
    assert "CREATE_FAILED" == stack["status"], stack
    reason = stack["status_reason"]
    assert "internal error" not in reason.lower(), reason
    assert "group" in reason, reason
    group = next(r for r in resources if r["name"] == "group")
    assert group["status"].endswith("FAILED"), group
    after = next((r for r in resources if r["name"] == "after"), None)
    assert after is None or not after["status"].endswith("COMPLETE"), after  # it waited on the group
    assert not any(
        "internal error" in str(e.get("reason", e.get("status_reason", ""))).lower() for e in events
    )
