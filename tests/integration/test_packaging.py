"""The agent's Debian package: build it, read it, run what it installs.

packaging/build.sh builds the wheel and the .deb with dpkg-deb; the test checks the
package's contents and control data with `dpkg-deb -c` / `-I`; installs, upgrades, removes
and purges it with dpkg into a scratch root (`--root` with `--force-script-chrootless`: the
maintainer scripts honour DPKG_ROOT, as for building a server image; installing it into
this machine would touch its /opt and systemd, and the test checks it did not); and runs the
packaged agent from the unpacked tree against a real control plane.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import stop_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import ROOT
from tests.support.templates import one_script_deployment

STACK = one_script_deployment(
    """
    #!/bin/sh
    printf 'packaged agent on %s' "$deploy_server_id" > "$heat_outputs_path.where"
    """,
    outputs=["where"],
    server="pkgbox",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("dpkg-deb", "dpkg"):
        assert shutil.which(tool), f"{tool} is missing: run `make tools` (Debian's dpkg)"
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        ["bash", str(ROOT / "packaging" / "build.sh"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def _deb(built: Path) -> Path:
    debs = list(built.glob("anneal-agent_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def test_wheel_and_deb_are_built(built: Path) -> None:
    """packaging/build.sh builds a wheel and the anneal-agent .deb with its scripts, conffiles and version."""
    assert len(list(built.glob("anneal-*-py3-none-any.whl"))) == 1
    info = subprocess.run(
        ["dpkg-deb", "-I", str(_deb(built))], capture_output=True, text=True, check=True
    ).stdout
    for line in (
        "Package: anneal-agent",
        "Depends: python3 (>= 3.11)",
        "postinst",
        "prerm",
        "postrm",
        "conffiles",
    ):
        assert line in info, (line, info)
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(_deb(built)), "Version", "Architecture"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Version: 0.1.0" in fields


def test_deb_installs_the_agent_alone_with_a_restarting_unit(built: Path, tmp_path: Path) -> None:
    """The .deb holds the agent alone, a restarting unit, the relay's unit, a 0600 env file and shell completion."""
    listing = subprocess.run(
        ["dpkg-deb", "-c", str(_deb(built))], capture_output=True, text=True, check=True
    ).stdout
    entries = {
        line.split()[-1].removeprefix("./"): line.split()[:2]
        for line in listing.splitlines()
        if not line.split()[-1].startswith("->") and "->" not in line
    }
    assert entries["opt/anneal-agent/bin/anneal-agent"][0] == "-rwxr-xr-x"
    assert entries["lib/systemd/system/anneal-agent.service"] == ["-rw-r--r--", "root/root"]
    assert entries["lib/systemd/system/anneal-relay.service"] == ["-rw-r--r--", "root/root"]
    assert entries["etc/anneal-agent/agent.env"] == ["-rw-------", "root/root"]
    assert "opt/anneal-agent/bin/anneal" not in entries  # the control plane's CLI needs [control]
    # Shell completion where bash-completion and zsh look for it.
    assert entries["usr/share/bash-completion/completions/anneal-agent"] == ["-rw-r--r--", "root/root"]
    assert entries["usr/share/zsh/vendor-completions/_anneal-agent"] == ["-rw-r--r--", "root/root"]
    assert not [p for p in entries if "site-packages/sqlalchemy" in p]  # agent deps only
    assert [p for p in entries if p.endswith("site-packages/agent/loop.py")]
    # The unit restarts on failure and lets a running hook finish on stop.
    unpack = tmp_path / "unpack"
    subprocess.run(["dpkg-deb", "-x", str(_deb(built)), str(unpack)], check=True)
    unit = (unpack / "lib/systemd/system/anneal-agent.service").read_text()
    for line in (
        "Restart=on-failure",
        "KillMode=mixed",
        "EnvironmentFile=/etc/anneal-agent/agent.env",
        "/opt/anneal-agent/bin/anneal-agent run --state-dir /var/lib/anneal-agent",
    ):
        assert line in unit, line
    # The relay's unit, like the control plane's, lifts the 1,024-descriptor default (docs/operations.md).
    relay = (unpack / "lib/systemd/system/anneal-relay.service").read_text()
    assert "LimitNOFILE=65536" in relay and "anneal-agent relay" in relay
    assert (
        (unpack / "opt/anneal-agent/bin/anneal-agent")
        .read_text()
        .startswith("#!/opt/anneal-agent/bin/python")
    )


HOST_PATHS = (
    "/opt/anneal-agent",
    "/var/lib/anneal-agent",
    "/etc/anneal-agent",
    "/lib/systemd/system/anneal-agent.service",
    "/etc/systemd/system/multi-user.target.wants/anneal-agent.service",
)


def _dpkg(root: Path, log: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """dpkg on the scratch *root*: its database and files there, maintainer scripts run
    unchrooted with DPKG_ROOT set (python3 is not in the scratch root, so --force-depends)."""
    argv = ["dpkg", f"--root={root}", "--force-script-chrootless", "--force-depends", f"--log={log}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def _host_state() -> tuple[list[str], str]:
    known = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", "anneal-agent"], capture_output=True, text=True, check=False
    )
    return [p for p in HOST_PATHS if os.path.lexists(p)], known.stdout


def test_deb_installs_upgrades_removes_and_purges_with_dpkg_in_a_scratch_root(
    built: Path, tmp_path: Path
) -> None:
    """dpkg -i / -i again / -r / -P on a scratch root: maintainer scripts, conffile, state dir kept until purge."""
    host_before = _host_state()
    assert ([], "") == (host_before[0], host_before[1].replace("unknown ok not-installed", "")), host_before
    root, log = tmp_path / "root", tmp_path / "dpkg.log"
    (root / "var/lib/dpkg/info").mkdir(parents=True)
    (root / "var/lib/dpkg/updates").mkdir()
    (root / "var/lib/dpkg/status").touch()
    deb = str(_deb(built))
    try:
        done = _dpkg(root, log, "-i", deb)
        assert 0 == done.returncode, done.stderr
        assert "install ok installed" in _dpkg(root, log, "-s", "anneal-agent").stdout
        state = (root / "var/lib/anneal-agent").stat()
        assert (state.st_mode & 0o777, state.st_uid, state.st_gid) == (0o700, 0, 0)
        assert 0o600 == (root / "etc/anneal-agent/agent.env").stat().st_mode & 0o777
        wants = root / "etc/systemd/system/multi-user.target.wants/anneal-agent.service"
        assert "/lib/systemd/system/anneal-agent.service" == os.readlink(
            wants
        )  # enabled for the image's boot
        # The installed agent runs and reads the installed state dir.
        agent = [str(root / "opt/anneal-agent/bin/python3"), str(root / "opt/anneal-agent/bin/anneal-agent")]
        status = subprocess.run(
            [*agent, "status", "--state-dir", str(root / "var/lib/anneal-agent")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},  # as systemd runs it
        )
        assert list((root / "opt/anneal-agent").rglob("__pycache__")), "the run wrote no bytecode"
        assert (
            2 == status.returncode and "holds no enrolment; run `anneal-agent enrol` first" in status.stderr
        )

        # An upgrade (the same package again) keeps the ledger and an edited agent.env.
        (root / "var/lib/anneal-agent/ledger.sqlite").write_bytes(b"the run-once ledger")
        env = root / "etc/anneal-agent/agent.env"
        env.write_text(env.read_text() + "ANNEAL_LOG_LEVEL=DEBUG\n")
        done = _dpkg(root, log, "--force-confold", "-i", deb)
        assert 0 == done.returncode, done.stderr
        assert b"the run-once ledger" == (root / "var/lib/anneal-agent/ledger.sqlite").read_bytes()
        assert "ANNEAL_LOG_LEVEL=DEBUG" in env.read_text()

        # Remove: the code and the unit's link go; the conffile and the state dir stay.
        done = _dpkg(root, log, "-r", "anneal-agent")
        assert 0 == done.returncode, done.stderr
        assert "deinstall ok config-files" in _dpkg(root, log, "-s", "anneal-agent").stdout
        left = (
            [str(p.relative_to(root)) for p in (root / "opt").rglob("*")] if (root / "opt").exists() else []
        )
        assert [] == left and not os.path.lexists(wants)  # the bytecode the run wrote too
        assert env.exists() and (root / "var/lib/anneal-agent/ledger.sqlite").exists()

        # Purge: everything goes.
        done = _dpkg(root, log, "-P", "anneal-agent")
        assert 0 == done.returncode, done.stderr
        assert not (root / "var/lib/anneal-agent").exists() and not (root / "etc/anneal-agent").exists()
    finally:
        assert host_before == _host_state(), "dpkg on the scratch root changed this machine"


@pytest.fixture
def cp(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path, "--provisioner", "enrol")
    yield plane
    stop_control_plane(plane)


def test_packaged_agent_runs_against_a_real_control_plane(
    built: Path, tmp_path: Path, cp: ControlPlane
) -> None:
    """The agent unpacked from the .deb (no SQLAlchemy) enrols and runs a real control plane's deployment."""
    unpack = tmp_path / "unpack"
    subprocess.run(["dpkg-deb", "-x", str(_deb(built)), str(unpack)], check=True)
    venv = unpack / "opt/anneal-agent"
    python = str(venv / "bin" / "python3")
    where = subprocess.run(
        [python, "-c", "import agent, sys; print(agent.__file__); import sqlalchemy"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert where.stdout.startswith(str(venv)), where  # the packaged code, not this checkout
    assert "No module named 'sqlalchemy'" in where.stderr
    # cwd is a scratch dir everywhere: Python puts the cwd on sys.path for `-c` and `-m`
    # (the built-in hooks run as `python -m hooks.<group>`), and it must not be this checkout.
    agent = [python, str(venv / "bin" / "anneal-agent")]
    token = cp.api("POST", "/v1/servers", {"name": "pkgbox"}).body["enrol_token"]
    state = tmp_path / "state"
    enrol = subprocess.run(
        [*agent, "enrol", "--url", cp.url, f"--token={token}", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert enrol.returncode == 0, enrol.stderr
    with open(tmp_path / "agent.log", "wb") as log:
        proc = subprocess.Popen(
            [*agent, "run", "--state-dir", str(state), "--poll-wait", "2", "--hook-dir", str(tmp_path)],
            stdout=log,
            stderr=log,
            cwd=tmp_path,
        )
        try:
            assert cp.create("pkg", STACK).status == 201
            stack = cp.wait_stack("pkg", timeout=120)
        finally:
            stop_agent(proc)
    assert stack["status"] == "CREATE_COMPLETE", (tmp_path / "agent.log").read_text()[-2000:]
    server_id = cp.api("GET", "/v1/servers/pkgbox").body["id"]
    assert cp.outputs("pkg")["where"] == f"packaged agent on {server_id}"
    status = subprocess.run(
        [*agent, "status", "--json", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert [d["state"] for d in json.loads(status.stdout)["deployments"]] == ["signalled"]


CLOUD_INIT = ROOT / ".venv" / "tools" / "cloud-init" / "bin" / "cloud-init"


def _schema(path: Path) -> subprocess.CompletedProcess[str]:
    assert CLOUD_INIT.exists(), f"{CLOUD_INIT} is missing: run `make tools` (ci/tools.d/70-cloud-init.sh)"
    return subprocess.run(
        [str(CLOUD_INIT), "schema", "--config-file", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cloud_init_example_is_valid_cloud_config(tmp_path: Path) -> None:
    """cloud-init's own `schema` command accepts packaging/cloud-init/user-data.yaml (and refuses a broken copy)."""
    example = ROOT / "packaging" / "cloud-init" / "user-data.yaml"
    checked = _schema(example)
    assert 0 == checked.returncode and "Valid cloud-config" in checked.stdout, checked.stdout + checked.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(example.read_text().replace("packages: [python3, curl]", "packages: python3"))
    refused = _schema(broken)
    assert (
        0 != refused.returncode
        and "packages: 'python3' is not of type 'array'" in refused.stderr + refused.stdout
    )


def test_lintian_finds_no_errors_or_warnings(built: Path) -> None:
    """Debian's lintian passes the .deb (the overrides it ships name why /opt, 0600 agent.env, ...)."""
    assert shutil.which("lintian"), "lintian is missing: run `make tools` (ci/tools.d/71-lintian.sh)"
    checked = subprocess.run(
        ["lintian", "--tag-display-limit", "0", "--fail-on", "error,warning", str(_deb(built))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == checked.returncode, checked.stdout + checked.stderr
