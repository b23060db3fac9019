"""The docker-compose hook against real podman and podman-compose from Debian (ci/tools.d/24-podman.sh).

The image is built here from a tarball (busybox-static's one binary as its root
filesystem, `podman import`): no registry is contacted. Three settings this sandbox
needs, each for a reason podman states when it is missing: `runc` instead of crun (crun
refuses cgroups in hybrid mode: "cgroups in hybrid mode not supported"), no default
ulimits ("setrlimit RLIMIT_NOFILE: Operation not permitted"), and the cgroupfs manager.
Storage, run state and network configs live in the test's own directory, and every
podman command runs in a network namespace the test creates (`nsenter --net`), so the
bridge podman-compose makes for a project never touches the host's interfaces.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hookrun import deployment, run_hook

PODMAN, COMPOSE, BUSYBOX = Path("/usr/bin/podman"), Path("/usr/bin/podman-compose"), Path("/bin/busybox")
IMAGE = "localhost/anneal-compose-test:1"
#: Bounds each podman command the test runs itself.
BOUND = 180


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=BOUND, check=False)


def _wrapper(bin_dir: Path, netns: str, program: Path) -> None:
    path = bin_dir / program.name
    path.write_text(f'#!/bin/sh\nexec nsenter --net=/run/netns/{netns} {program} "$@"\n')
    path.chmod(0o755)


def _image(root: Path, env: dict[str, str]) -> None:
    """An image whose root filesystem is busybox and its applet links, imported from a tarball."""
    rootfs = root / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy2(BUSYBOX, rootfs / "bin" / "busybox")
    for applet in ("sh", "echo", "cat", "sleep", "true"):
        (rootfs / "bin" / applet).symlink_to("busybox")
    with tarfile.open(root / "rootfs.tar", "w") as tar:
        tar.add(rootfs, arcname=".")
    imported = _run(env, str(PODMAN), "import", str(root / "rootfs.tar"), IMAGE)
    assert imported.returncode == 0, imported.stderr


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment the hook runs podman-compose with; skipped (saying why) where podman cannot run."""
    missing = [str(p) for p in (PODMAN, COMPOSE, BUSYBOX) if not p.exists()] + (
        [] if shutil.which("runc") else ["runc"]
    )
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `make tools` (ci/tools.d/24-podman.sh)")
    root = tmp_path_factory.mktemp("podman")
    netns = f"anneal-compose-{uuid.uuid4().hex[:8]}"
    (root / "storage.conf").write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{root}/storage"\nrunroot = "{root}/run"\n'
    )
    (root / "containers.conf").write_text(
        "[containers]\ndefault_ulimits = []\n"
        '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\nruntime = "runc"\n'
        f'[network]\nnetwork_config_dir = "{root}/cni"\n'
    )
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for program in (PODMAN, COMPOSE):
        _wrapper(bin_dir, netns, program)
    env = {
        **os.environ,
        "CONTAINERS_STORAGE_CONF": str(root / "storage.conf"),
        "CONTAINERS_CONF": str(root / "containers.conf"),
        "PATH": f"{bin_dir}:{os.environ.get('PATH', os.defpath)}",
    }
    subprocess.run(["ip", "netns", "add", netns], check=True, timeout=BOUND)
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True, timeout=BOUND)
    try:
        _image(root, env)
        probe = _run(env, str(bin_dir / "podman"), "run", "--rm", "--network", "none", IMAGE, "true")
        if probe.returncode != 0:
            pytest.skip(f"podman cannot run a container in this sandbox: {probe.stderr.strip()}")
        yield env
    finally:
        _run(env, str(bin_dir / "podman"), "rm", "--all", "--force", "--time", "0")
        subprocess.run(["ip", "netns", "del", netns], check=False, timeout=BOUND)
        shutil.rmtree(root, ignore_errors=True)


def compose(out: Path) -> dict[str, object]:
    """One service that writes its greeting (from the env file) to *out*, then waits for its stop."""
    # $$: a literal $ for the shell; compose itself would substitute $GREETING from its own environment.
    script = "trap 'exit 0' TERM; echo \"$$GREETING\" > /out/marker; sleep 300 & wait"
    service = {
        "image": IMAGE,
        "env_file": ["app.env"],
        "volumes": [f"{out}:/out"],
        "command": ["sh", "-c", script],
    }
    return {"version": "3", "services": {"web": service}}


def _containers(env: dict[str, str]) -> list[str]:
    listed = _run(env, "podman", "ps", "--format", "{{.Names}}")
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


def test_up_runs_the_project_with_its_env_file_and_delete_brings_it_down(
    podman: dict[str, str], tmp_path: Path
) -> None:
    """CREATE: the service runs with the env_files input; DELETE: `down` removes it; both status 0."""
    out = tmp_path / "out"
    out.mkdir()
    config = compose(out)
    env_files = [{"file_name": "app.env", "content": "GREETING=hello from compose\n"}]
    item = deployment("docker-compose", config, inputs={"env_files": env_files})
    item["name"] = "Web App"
    result, _ = run_hook("docker_compose", tmp_path / "w", item, **_hook_env(podman))
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert (out / "marker").read_text() == "hello from compose\n"
    assert "web-app_web_1" in _containers(podman)
    down = deployment("docker-compose", config, inputs={"env_files": env_files}, action="DELETE")
    down["name"] = "Web App"
    result, _ = run_hook("docker_compose", tmp_path / "w", down, **_hook_env(podman))
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert "web-app_web_1" not in _containers(podman)


def test_a_failed_podman_step_fails_the_deployment_though_podman_compose_exits_0(
    podman: dict[str, str], tmp_path: Path
) -> None:
    """podman refuses an unknown capability (125); podman-compose exits 0; the hook reports 125."""
    config = {"version": "3", "services": {"bad": {"image": IMAGE, "cap_add": ["NOT_A_CAPABILITY"]}}}
    result, _ = run_hook(
        "docker_compose", tmp_path / "w", deployment("docker-compose", config), **_hook_env(podman)
    )
    assert result["deploy_status_code"] == 125, result
    assert "podman-compose exited 0, but a podman command it ran exited 125" in result["deploy_stderr"]
    _run(podman, "podman", "rm", "--all", "--force", "--time", "0")


def test_no_compose_tool_is_a_failure_naming_what_was_searched(tmp_path: Path) -> None:
    """Without docker, podman-compose or docker-compose on PATH the deployment fails (127), never silently."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    item = deployment("docker-compose", {"services": {}})
    result, _ = run_hook("docker_compose", tmp_path / "w", item, PATH=str(empty))
    assert result["deploy_status_code"] == 127
    assert "podman-compose" in result["deploy_stderr"] and str(empty) in result["deploy_stderr"]


def _hook_env(podman: dict[str, str]) -> dict[str, str]:
    keys = ("CONTAINERS_STORAGE_CONF", "CONTAINERS_CONF", "PATH")
    return {k: podman[k] for k in keys}
