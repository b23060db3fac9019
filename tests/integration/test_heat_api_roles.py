"""The real openstack CLI with project tokens (`anneal token create`) against Heat's API: roles and projects hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import PROJECT, OpenStack, start_heat_plane, write_template

TEMPLATE = """heat_template_version: 2018-08-31
resources:
  cfg: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: "true"}}
"""


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[tuple[ControlPlane, str]]:
    cp, heat_url = start_heat_plane(tmp_path)
    yield cp, heat_url
    stop_control_plane(cp)


def test_member_reader_and_other_project_through_the_openstack_cli(
    plane: tuple[ControlPlane, str], tmp_path: Path
) -> None:
    """A member of the project creates a stack, its reader lists it but cannot delete it (403), a member of
    another project does not find it under its own project and is refused (403) under this one."""
    cp, heat_url = plane
    tokens = {
        (project, role): cp.api("POST", "/v1/tokens", {"project": project, "role": role}).body["token"]
        for project, role in ((PROJECT, "member"), (PROJECT, "reader"), ("others", "member"))
    }
    member = OpenStack(cp, f"{heat_url}/v1/{PROJECT}", tokens[(PROJECT, "member")])
    member.ok("stack", "create", "-t", write_template(tmp_path, "t.yaml", TEMPLATE), "--wait", "one")
    reader = OpenStack(cp, f"{heat_url}/v1/{PROJECT}", tokens[(PROJECT, "reader")])
    assert ["one"] == [s["Stack Name"] for s in reader.json("stack", "list")]
    refused = reader.run("stack", "delete", "--yes", "one")
    assert 0 != refused.returncode and "Forbidden: one" in refused.stdout, refused
    other = OpenStack(cp, f"{heat_url}/v1/others", tokens[("others", "member")])
    assert [] == other.json("stack", "list")
    missing = other.run("stack", "show", "one")
    assert 0 != missing.returncode and "Stack not found: one" in missing.stderr, missing
    crossing = OpenStack(cp, f"{heat_url}/v1/{PROJECT}", tokens[("others", "member")]).run("stack", "list")
    assert 0 != crossing.returncode and f"The token's project is not {PROJECT}" in crossing.stderr, crossing
    assert "CREATE_COMPLETE" == cp.api("GET", "/v1/stacks/one").body["status"]  # the admin sees every project
    rows = cp.api("GET", "/v1/audit").body
    assert [("POST", 201), ("DELETE", 403)] == [
        (r["method"], r["status"]) for r in rows if r["api"] == "heat"
    ]
