"""The node allowlist: a validly signed document naming a hook group or config outside it runs nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import agent_status
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.waiting import wait_until

#: A hook for group `marker` in the agents' hook dir: it leaves a file when it runs.
MARKER_HOOK = """#!/bin/sh
cat > /dev/null
touch "$(dirname "$0")/../marker-ran"
echo '{"deploy_status_code": 0}'
"""


def template(configs: dict[str, tuple[str, str]]) -> str:
    """One server, and per name a config (group, text) and its deployment `dep-<name>`."""
    resources: dict[str, Any] = {"srv": {"type": "OS::Heat::DeployedServer"}}
    for name, (group, text) in configs.items():
        resources[f"cfg-{name}"] = {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": group, "config": text},
        }
        resources[f"dep-{name}"] = {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {"config": {"get_resource": f"cfg-{name}"}, "server": {"get_resource": "srv"}},
        }
    return json.dumps({"heat_template_version": "2018-08-31", "resources": resources})


def deployments(cp: ControlPlane, stack: str) -> dict[str, dict[str, Any]]:
    """The stack's deployments by resource name, each as `deployment show` gives it."""
    listed = cp.api("GET", f"/v1/deployments?stack={stack}").body
    return {d["resource_name"]: cp.api("GET", f"/v1/deployments/{d['id']}").body for d in listed}


def settled(cp: ControlPlane, stack: str) -> dict[str, dict[str, Any]]:
    """The stack's deployments once none is IN_PROGRESS (the stack fails at its first failure)."""

    def done() -> dict[str, dict[str, Any]] | None:
        deps = deployments(cp, stack)
        return deps if all(d["status"] != "IN_PROGRESS" for d in deps.values()) else None

    return wait_until(done, f"every deployment of {stack} settles", 60, 0.2)


@pytest.fixture
def allowlisted(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane whose local agents run with the allowlist flags the test gives, and the marker hook."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "marker").write_text(MARKER_HOOK)
    (hooks / "marker").chmod(0o755)
    flags = [f"--agent-arg={flag}" for flag in request.param]
    cp = start_control_plane(tmp_path, f"--agent-arg=--hook-dir={hooks}", *flags)
    yield cp
    stop_control_plane(cp)


@pytest.mark.parametrize("allowlisted", [["--allow-group=script"]], indirect=True)
def test_a_group_outside_the_allowlist_is_refused_and_never_run(
    allowlisted: ControlPlane, tmp_path: Path
) -> None:
    """`marker` is not allowed: its deployment fails with the reason, its hook never runs; script still runs."""
    cp = allowlisted
    ok = tmp_path / "script-ran"
    cp.create_stack(
        "al",
        template({"ok": ("script", f"#!/bin/sh\ntouch {ok}\n"), "bad": ("marker", "")}),
        expect="CREATE_FAILED",
    )
    deps = settled(cp, "al")
    assert "COMPLETE" == deps["dep-ok"]["status"] and ok.exists()
    bad = deps["dep-bad"]
    assert ("FAILED", 126) == (bad["status"], bad["deploy_status_code"])
    assert "hook group 'marker' is not in this server's allowed_groups ['script']" in bad["status_reason"]
    assert "nothing was run" in bad["deploy_stderr"]
    assert not (tmp_path / "marker-ran").exists()
    entries = agent_status(cp.agent_dir("al-srv"))["entries"]
    assert ["refused by the node allowlist"] == [e["note"] for e in entries if e["status_code"] == 126]


ALLOWED = "#!/bin/sh\necho allowed\n"


def digest(text: str) -> str:
    """What `sha256sum` prints for *text*, as the allowlist writes it."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "allowlisted", [[f"--allow-config={digest(ALLOWED)}", f"--allow-config={digest('')}"]], indirect=True
)
def test_a_config_outside_the_allowed_digests_is_refused(allowlisted: ControlPlane, tmp_path: Path) -> None:
    """Only the pinned configs run (a script, the marker hook's empty config); another script is refused unrun."""
    cp = allowlisted
    other = tmp_path / "other-ran"
    other_text = f"#!/bin/sh\ntouch {other}\n"
    configs = {"a": ("script", ALLOWED), "b": ("script", other_text), "c": ("marker", "")}
    cp.create_stack("dg", template(configs), expect="CREATE_FAILED")
    deps = settled(cp, "dg")
    assert ("COMPLETE", "allowed\n") == (deps["dep-a"]["status"], deps["dep-a"]["deploy_stdout"])
    refused = f"config {digest(other_text)} of group 'script' is not in this server's allowed_configs"
    assert ("FAILED", 126) == (deps["dep-b"]["status"], deps["dep-b"]["deploy_status_code"])
    assert refused in deps["dep-b"]["status_reason"] and not other.exists()
    assert "COMPLETE" == deps["dep-c"]["status"] and (tmp_path / "marker-ran").exists()
