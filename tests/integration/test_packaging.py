"""The agent's Debian package (issue 6, item 6): build it, read it, run what it installs.

packaging/build.sh builds the wheel and the .deb with dpkg-deb; the test checks the
package's contents and control data with `dpkg-deb -c` / `-I`, unpacks it with
`dpkg-deb -x` (installing it for real would touch this machine's /opt and systemd),
and runs the packaged agent from the unpacked tree against a real control plane.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, ControlPlane, start_control_plane, stop_control_plane

pytestmark = pytest.mark.slow

STACK = """
heat_template_version: rocky
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: where}]
      config: |
        #!/bin/sh
        printf 'packaged agent on %s' "$deploy_server_id" > "$heat_outputs_path.where"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: pkgbox}
outputs:
  where: {value: {get_attr: [dep, where]}}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("dpkg-deb", "dpkg"):
        assert shutil.which(tool), f"{tool} is missing: run `make tools` (Debian's dpkg)"
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(["bash", str(ROOT / "packaging" / "build.sh"), str(out)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def _deb(built: Path) -> Path:
    debs = list(built.glob("anneal-agent_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def test_wheel_and_deb_are_built(built: Path):
    assert len(list(built.glob("anneal-*-py3-none-any.whl"))) == 1
    info = subprocess.run(["dpkg-deb", "-I", str(_deb(built))], capture_output=True, text=True, check=True).stdout
    for line in ("Package: anneal-agent", "Depends: python3 (>= 3.11)", "postinst", "prerm", "postrm", "conffiles"):
        assert line in info, (line, info)
    fields = subprocess.run(["dpkg-deb", "-f", str(_deb(built)), "Version", "Architecture"],
                            capture_output=True, text=True, check=True).stdout
    assert "Version: 0.1.0" in fields


def test_deb_contents(built: Path, tmp_path: Path):
    listing = subprocess.run(["dpkg-deb", "-c", str(_deb(built))], capture_output=True, text=True, check=True).stdout
    entries = {line.split()[-1].removeprefix("./"): line.split()[:2] for line in listing.splitlines()
               if not line.split()[-1].startswith("->") and "->" not in line}
    assert entries["opt/anneal-agent/bin/anneal-agent"][0] == "-rwxr-xr-x"
    assert entries["lib/systemd/system/anneal-agent.service"] == ["-rw-r--r--", "root/root"]
    assert entries["etc/anneal-agent/agent.env"] == ["-rw-------", "root/root"]
    assert "opt/anneal-agent/bin/anneal" not in entries  # the control plane's CLI needs [control]
    assert not [p for p in entries if "site-packages/sqlalchemy" in p]  # agent deps only
    assert [p for p in entries if p.endswith("site-packages/agent/loop.py")]
    # The unit restarts on failure and lets a running hook finish on stop.
    unpack = tmp_path / "unpack"
    subprocess.run(["dpkg-deb", "-x", str(_deb(built)), str(unpack)], check=True)
    unit = (unpack / "lib/systemd/system/anneal-agent.service").read_text()
    for line in ("Restart=on-failure", "KillMode=mixed", "EnvironmentFile=/etc/anneal-agent/agent.env",
                 "/opt/anneal-agent/bin/anneal-agent run --state-dir /var/lib/anneal-agent"):
        assert line in unit, line
    assert (unpack / "opt/anneal-agent/bin/anneal-agent").read_text().startswith("#!/opt/anneal-agent/bin/python")
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", str(_deb(built)), str(control)], check=True)
    postinst = (control / "postinst").read_text()
    assert "install -d -o root -g root -m 0700 /var/lib/anneal-agent" in postinst
    # The postinst really makes the state dir with that owner and mode (run against a fake root).
    fake = tmp_path / "fakeroot"
    script = postinst.replace("/var/lib/anneal-agent", str(fake / "var/lib/anneal-agent")).replace(
        "/etc/anneal-agent", str(unpack / "etc/anneal-agent")).replace("/run/systemd/system", str(fake / "nosystemd"))
    subprocess.run(["sh", "-c", script, "postinst", "configure"], check=True)
    made = (fake / "var/lib/anneal-agent").stat()
    assert (made.st_mode & 0o777, made.st_uid) == (0o700, 0)


@pytest.fixture
def cp(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path, "--provisioner", "enrol")
    yield plane
    stop_control_plane(plane)


def test_packaged_agent_runs_against_a_real_control_plane(built: Path, tmp_path: Path, cp: ControlPlane):
    unpack = tmp_path / "unpack"
    subprocess.run(["dpkg-deb", "-x", str(_deb(built)), str(unpack)], check=True)
    venv = unpack / "opt/anneal-agent"
    python = str(venv / "bin" / "python3")
    where = subprocess.run([python, "-c", "import agent, sys; print(agent.__file__); import sqlalchemy"],
                           capture_output=True, text=True, check=False, cwd=tmp_path)
    assert where.stdout.startswith(str(venv)), where  # the packaged code, not this checkout
    assert "No module named 'sqlalchemy'" in where.stderr
    # cwd is a scratch dir everywhere: Python puts the cwd on sys.path for `-c` and `-m`
    # (the built-in hooks run as `python -m hooks.<group>`), and it must not be this checkout.
    agent = [python, str(venv / "bin" / "anneal-agent")]
    token = cp.api("POST", "/v1/servers", {"name": "pkgbox"}).body["enrol_token"]
    state = tmp_path / "state"
    enrol = subprocess.run([*agent, "enrol", "--url", cp.url, f"--token={token}", "--state-dir", str(state)],
                           capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert enrol.returncode == 0, enrol.stderr
    with open(tmp_path / "agent.log", "wb") as log:
        proc = subprocess.Popen([*agent, "run", "--state-dir", str(state), "--poll-wait", "2",
                                 "--hook-dir", str(tmp_path)], stdout=log, stderr=log, cwd=tmp_path)
        try:
            assert cp.create("pkg", STACK).status == 201
            stack = cp.wait_stack("pkg", timeout=120)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    assert stack["status"] == "CREATE_COMPLETE", (tmp_path / "agent.log").read_text()[-2000:]
    server_id = cp.api("GET", "/v1/servers/pkgbox").body["id"]
    assert cp.outputs("pkg")["where"] == f"packaged agent on {server_id}"
    status = subprocess.run([*agent, "status", "--json", "--state-dir", str(state)],
                            capture_output=True, text=True, check=True, cwd=tmp_path)
    assert [d["state"] for d in json.loads(status.stdout)["deployments"]] == ["signalled"]
