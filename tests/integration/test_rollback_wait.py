"""`stack update --rollback --wait`: a rollback that completes is still a failed change (non-zero, and why)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.controlplane import ControlPlane

#: One script deployment; REV=bad makes it fail with a message on stderr.
TEMPLATE = {
    "heat_template_version": "2018-08-31",
    "parameters": {"rev": {"type": "string", "default": "r1"}},
    "resources": {
        "srv": {"type": "OS::Heat::DeployedServer"},
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {
                "group": "script",
                "inputs": [{"name": "REV"}],
                "config": '#!/bin/sh\nif [ "$REV" = bad ]; then echo "release $REV is broken" >&2; exit 7; fi\n',
            },
        },
        "dep": {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {
                "config": {"get_resource": "cfg"},
                "server": {"get_resource": "srv"},
                "input_values": {"REV": {"get_param": "rev"}},
            },
        },
    },
}


def test_update_wait_exits_non_zero_on_rollback_complete_and_says_why(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A failed update rolled back ends ROLLBACK_COMPLETE: exit 1, the failed resource and its reason printed."""
    cp = control_plane
    template = tmp_path / "rev.json"
    template.write_text(json.dumps(TEMPLATE))
    created = cp.cli("stack", "create", "rb", "-t", str(template), "--wait")
    assert created.returncode == 0, created.stdout + created.stderr
    done = cp.cli("stack", "update", "rb", "-t", str(template), "-P", "rev=bad", "--rollback", "--wait")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stack rb: ROLLBACK_COMPLETE" in done.stdout
    why = "stack rb was rolled back: Resource UPDATE failed: dep: Deployment exited with non-zero status code: 7"
    assert why in done.stdout.splitlines(), done.stdout
    assert cp.api("GET", "/v1/stacks/rb").body["parameters"]["rev"] == "r1"
    again = cp.cli("stack", "update", "rb", "-t", str(template), "-P", "rev=r2", "--rollback", "--wait")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "stack rb: UPDATE_COMPLETE" in again.stdout
