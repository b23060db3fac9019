"""The real openstack CLI (python-openstackclient + python-heatclient from PyPI) against Anneal's Heat API.

Installed by `ci/tools.d/80-openstackclient.sh` into `.venv/tools/openstackclient`;
it authenticates as an operator without Keystone would: keystoneauth's admin_token
plugin, the endpoint given, the admin token sent as X-Auth-Token (docs/heat-api.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import Any

from tests.support.controlplane import ControlPlane
from tests.support.processes import ROOT

OPENSTACK = ROOT / ".venv" / "tools" / "openstackclient" / "bin" / "openstack"


def require_openstack() -> None:
    """Fail (not skip) when the CLI is missing, naming the command that installs it."""
    if not OPENSTACK.exists():
        raise AssertionError(f"the openstack CLI is missing ({OPENSTACK}): run `make tools`")


@dataclass
class OpenStack:
    """`openstack ...` aimed at one control plane's Heat endpoint for one project."""

    cp: ControlPlane
    endpoint: str

    def run(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """Run `openstack *args*`; the result as the operator would see it (stdout, stderr, exit status)."""
        argv = [
            str(OPENSTACK),
            "--os-auth-type",
            "admin_token",
            "--os-endpoint",
            self.endpoint,
            "--os-token",
            self.cp.token,
            *args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)

    def ok(self, *args: str, timeout: float = 240) -> str:
        """Run and expect exit status 0; the stdout."""
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, (
            f"openstack {' '.join(args)}: {done.stderr}\n{done.stdout}\nlog: {self.cp.log}"
        )
        return done.stdout

    def json(self, *args: str, timeout: float = 240) -> Any:
        """Run with `-f json` and parse what it printed."""
        return json.loads(self.ok(*args, "-f", "json", timeout=timeout))
