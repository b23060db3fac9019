"""The real openstack CLI (python-openstackclient + python-heatclient from PyPI) against Anneal's Heat API.

Installed by `ci/tools.d/80-openstackclient.sh` into `.venv/tools/openstackclient`;
it authenticates as an operator without Keystone would: keystoneauth's admin_token
plugin, the endpoint given, the admin token sent as X-Auth-Token (docs/heat-api.md).

Each command runs in a child forked from one process that imported the CLI once
(tests/support/osc_fork.py): the CLI's own entry point with the command's argv and
environment, its exit status, stdout and stderr, without the 1.3-1.8 s of imports
(2.5-3 s a command became 0.5-0.8 s). A command issued while another of this test
process is still running, or with ANNEAL_OSC_FORK=0, runs as its own process.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.controlplane import ControlPlane, start_control_plane
from tests.support.processes import ROOT, free_port
from tests.support.waiting import wait_until

OPENSTACK = ROOT / ".venv" / "tools" / "openstackclient" / "bin" / "openstack"
#: gabbi's virtualenv with heat-tempest-plugin's gabbi files beside it (ci/tools.d/81-gabbi.sh).
GABBI = ROOT / ".venv" / "tools" / "gabbi"
#: The project id the tests put in the Heat endpoint's path.
PROJECT = "ops-team"

GREETER = """
heat_template_version: 2018-08-31
description: one script on one server
parameters:
  who: {type: string, default: world}
  pause: {type: number, default: 0}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: %(server)s}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: PAUSE}]
      outputs: [{name: greeting}]
      config: |
        #!/bin/sh
        sleep "$PAUSE"
        echo "greeting $WHO"
        printf 'hello %%s' "$WHO" > "$heat_outputs_path.greeting"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE, SUSPEND, RESUME]
      input_values: {WHO: {get_param: who}, PAUSE: {get_param: pause}}
outputs:
  greeting: {value: {get_attr: [dep, greeting]}, description: what the script said}
"""


def start_heat_plane(tmp: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[ControlPlane, str]:
    """A control plane with Heat's API on a free port, and that API's root URL (from the line announcing it)."""
    cp = start_control_plane(tmp, "--heat-listen", f"127.0.0.1:{free_port()}", *extra, env=env)
    line = wait_until(
        lambda: next((x for x in cp.log.read_text().splitlines() if "Orchestration API v1 on" in x), None),
        "the Heat API was not announced",
    )
    return cp, line.split(" on ", 1)[1].split("/v1/", 1)[0]


def write_template(work: Path, name: str, text: str) -> str:
    """Write *text* to work/name for a `-t` or `--config-file` argument; its path."""
    path = work / name
    path.write_text(text)
    return str(path)


def heat_request(
    cp: ControlPlane, heat_url: str, method: str, path: str, body: Any = None, token: str | None = "admin"
) -> tuple[int, Any]:
    """One request to the Heat endpoint of project PROJECT, as any HTTP client sends it: (status, JSON body)."""
    secret = cp.token if token == "admin" else token
    headers = {"Content-Type": "application/json", **({"X-Auth-Token": secret} if secret else {})}
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{heat_url}/v1/{PROJECT}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def require_openstack() -> None:
    """Fail (not skip) when the CLI is missing, naming the command that installs it."""
    if not OPENSTACK.exists():
        raise AssertionError(f"the openstack CLI is missing ({OPENSTACK}): run `make tools`")


@dataclass
class OpenStack:
    """`openstack ...` aimed at one control plane's Heat endpoint for one project, with the admin token (or *token*);
    or, given *auth* (`--os-auth-url ... --os-password ...`), found in Keystone's catalogue as against Heat."""

    cp: ControlPlane
    endpoint: str
    #: The token sent; None: the control plane's admin token.
    token: str | None = None
    auth: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        require_openstack()

    def run(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """Run `openstack *args*`; the result as the operator would see it (stdout, stderr, exit status)."""
        admin = (
            "--os-auth-type",
            "admin_token",
            "--os-endpoint",
            self.endpoint,
            "--os-token",
            self.token or self.cp.token,
        )
        # The venv's own python runs the script: its #! names the path the venv was made at, which may be gone.
        argv = [str(OPENSTACK.parent / "python"), str(OPENSTACK), *(self.auth or admin), *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        forked = FORKS.run(argv, env, timeout)
        if forked is not None:
            return forked
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

    def get(self, path: str) -> Any:
        """GET *path* under this Heat endpoint over plain HTTP with the control plane's admin token: what a
        wait polls (each CLI run costs about a second of CPU), before the CLI shows what was waited for."""
        request = urllib.request.Request(self.endpoint + path, headers={"X-Auth-Token": self.cp.token})
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read())

    def under(self, stack: str, path: str) -> Any:
        """GET *path* under *stack*'s canonical URL (its name and id) over plain HTTP, as get() does."""
        stack_id = self.get(f"/stacks/{stack}")["stack"]["id"]
        return self.get(f"/stacks/{stack}/{stack_id}{path}")


class Forks:
    """The osc_fork.py process of this test process, started at its first command."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        atexit.register(self.close)

    def run(
        self, argv: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str] | None:
        """*argv* run forked, as subprocess.run would answer; None when it must run as its own process."""
        if os.environ.get("ANNEAL_OSC_FORK") == "0" or not self._lock.acquire(blocking=False):
            return None
        try:
            proc = self._started(argv[0], env)
            with tempfile.TemporaryDirectory(prefix="anneal-osc-") as tmp:
                out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
                request = {
                    "argv": argv[1:],
                    "env": env,
                    "stdout": str(out),
                    "stderr": str(err),
                    "timeout": timeout,
                }
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
                answer = proc.stdout.readline()
                if not answer:
                    self._proc = None
                    raise AssertionError(
                        f"tests/support/osc_fork.py exited ({proc.wait()}) running {argv[2:]}"
                    )
                done = json.loads(answer)
                stdout, stderr = out.read_text(), err.read_text()
            if done.get("timeout"):
                raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
            return subprocess.CompletedProcess(argv, done["returncode"], stdout, stderr)
        finally:
            self._lock.release()

    def _started(self, python: str, env: dict[str, str]) -> subprocess.Popen[str]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        script = Path(__file__).with_name("osc_fork.py")
        proc = subprocess.Popen(
            [python, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None
        if json.loads(proc.stdout.readline() or "{}").get("ready") is not True:
            raise AssertionError(f"tests/support/osc_fork.py did not start ({proc.wait()})")
        self._proc = proc
        return proc

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()  # it ends at the end of its requests
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


FORKS = Forks()


def run_heat_gabbits(cp: ControlPlane, heat_url: str, prefix: str) -> dict[str, Any]:
    """Heat's own API tests (heat-tempest-plugin's gabbi files) against *cp*'s Heat endpoint: each outcome."""
    if not (GABBI / "gabbits").is_dir():
        raise AssertionError(f"gabbi or Heat's gabbi files are missing ({GABBI}): run `make tools`")
    done = subprocess.run(
        [str(GABBI / "bin" / "python"), str(ROOT / "tests" / "support" / "heat_gabbi.py"),
         f"{heat_url}/v1/{PROJECT}", str(GABBI / "gabbits")],
        env={**os.environ, "OS_TOKEN": cp.token, "PREFIX": prefix},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result
