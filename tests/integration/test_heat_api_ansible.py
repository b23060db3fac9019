"""Ansible's openstack.cloud.stack module (openstacksdk) drives a stack on Anneal's Heat API, as on Heat.

The collection, ansible-core and openstacksdk come from PyPI (`ci/tools.d/83-ansible-openstack.sh`); the
playbook authenticates as an operator without Keystone would (keystoneauth's admin_token: the endpoint and
the admin token), creates the greeter stack, updates a parameter and deletes it, each task waiting as the
module always does.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import GREETER, PROJECT, start_heat_plane, write_template
from tests.support.processes import ROOT

VENV = ROOT / ".venv" / "tools" / "ansible-openstack"
PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    cloud: &cloud
      auth_type: admin_token
      auth: {endpoint: "%(endpoint)s", token: "%(token)s"}
  tasks:
    - name: the stack, as the template says
      openstack.cloud.stack:
        <<: *cloud
        name: "%(name)s"
        template: "%(template)s"
        parameters: {who: "%(who)s"}
        state: "%(state)s"
      register: made
    - name: what the module answered
      ansible.builtin.copy: {content: "{{ made | to_json }}", dest: "%(out)s"}
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with the Heat listener for this module, and the Heat API's root URL."""
    if not (VENV / "collections" / "ansible_collections" / "openstack" / "cloud").is_dir():
        raise AssertionError(f"openstack.cloud is missing ({VENV}): run `make tools`")
    cp, url = start_heat_plane(tmp_path_factory.mktemp("heat-ansible"))
    yield cp, url
    stop_control_plane(cp)


def _play(plane: tuple[ControlPlane, str], work: Path, state: str, who: str = "") -> dict[str, object]:
    """Run the playbook with *state* (and parameter *who*); what the stack module registered."""
    cp, url = plane
    template = write_template(work, "greeter.yaml", GREETER % {"server": "ansible-box"})
    values = {
        "endpoint": f"{url}/v1/{PROJECT}",
        "token": cp.token,
        "name": "viaansible",
        "template": template,
    }
    out = work / f"{state}-{who}.json"
    book = write_template(work, "play.yml", PLAYBOOK % {**values, "who": who, "state": state, "out": out})
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OS_", "ANSIBLE_"))},
        "ANSIBLE_COLLECTIONS_PATH": str(VENV / "collections"),
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_HOME": str(work / "home"),
        "ANSIBLE_PYTHON_INTERPRETER": str(VENV / "bin" / "python"),
    }
    done = subprocess.run(
        [str(VENV / "bin" / "python"), str(VENV / "bin" / "ansible-playbook"), "-i", "localhost,", book],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-2000:]}\nlog: {cp.log}"
    found: dict[str, object] = json.loads(out.read_text())
    return found


def test_stack_module_creates_updates_and_deletes_a_stack(
    plane: tuple[ControlPlane, str], tmp_path: Path
) -> None:
    """state=present creates the stack (its script runs), present again with another parameter updates it,
    state=absent deletes it: Anneal's own API sees each, and the module reports each change."""
    cp = plane[0]
    made = _play(plane, tmp_path, "present", "ansible")
    assert made["changed"] is True
    assert cp.api("GET", "/v1/stacks/viaansible").body["status"] == "CREATE_COMPLETE"
    assert cp.outputs("viaansible")["greeting"] == "hello ansible"
    updated = _play(plane, tmp_path, "present", "again")
    assert updated["changed"] is True
    assert cp.api("GET", "/v1/stacks/viaansible").body["status"] == "UPDATE_COMPLETE"
    assert cp.outputs("viaansible")["greeting"] == "hello again"
    gone = _play(plane, tmp_path, "absent")
    assert gone["changed"] is True
    assert cp.api("GET", "/v1/stacks/viaansible").status == 404
