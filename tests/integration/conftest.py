"""A real control plane (`anneal serve` as a subprocess) with local agents, on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.pg import Postgres, running_postgres

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str]


@dataclass
class ControlPlane:
    url: str
    token: str
    data_dir: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "ANNEAL_URL": self.url,
            "ANNEAL_TOKEN": self.token,
            "ANNEAL_CONFIG": "/nonexistent",
        }

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the installed `anneal` command against this control plane."""
        return subprocess.run(
            [str(BIN / "anneal"), *args],
            env=self.env(),
            text=True,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = "admin",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if token == "admin":
            hdrs["Authorization"] = f"Bearer {self.token}"
        elif token:
            hdrs["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                content = resp.read()
                return Response(resp.status, json.loads(content) if content else None, dict(resp.headers))
        except urllib.error.HTTPError as e:
            content = e.read()
            try:
                parsed = json.loads(content) if content else None
            except ValueError:
                parsed = content.decode("utf-8", "replace")
            return Response(e.code, parsed, dict(e.headers))

    def create(
        self,
        name: str,
        template: str | Path,
        *,
        params: dict[str, str] | None = None,
        files: dict[str, str] | None = None,
        environments: list[str] | None = None,
    ) -> Response:
        text = template.read_text() if isinstance(template, Path) else template
        return self.api(
            "POST",
            "/v1/stacks",
            {
                "name": name,
                "template": text,
                "files": files or {},
                "parameters": params or {},
                "environments": environments or [],
            },
        )

    def wait_stack(self, name: str, timeout: float = 120) -> dict[str, Any]:
        """Poll until the stack leaves IN_PROGRESS (bounded in time)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            resp = self.api("GET", f"/v1/stacks/{name}")
            if resp.status == 404:
                return {"status": "DELETED"}
            if not resp.body["status"].endswith("IN_PROGRESS"):
                return dict(resp.body)
            time.sleep(0.2)
        raise AssertionError(f"stack {name} still in progress after {timeout} s; log: {self.log}")

    def settled(self, name: str, expect: str | None, timeout: float = 120) -> dict[str, Any]:
        """Wait for *name* to leave IN_PROGRESS; assert it ends as *expect* (None: any status)."""
        stack = self.wait_stack(name, timeout)
        if expect is not None:
            assert expect == stack["status"], (
                f"stack {name}: {stack['status']} {stack.get('status_reason', '')}"
            )
        return stack

    def create_stack(
        self,
        name: str,
        template: str | Path,
        *,
        expect: str | None = "CREATE_COMPLETE",
        timeout: float = 120,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Create *name* (201) and wait until it settles as *expect*; *kwargs* go to create()."""
        resp = self.create(name, template, **kwargs)
        assert 201 == resp.status, resp.body
        return self.settled(name, expect, timeout)

    def update_stack(
        self,
        name: str,
        template: str | Path,
        params: dict[str, str] | None = None,
        *,
        expect: str | None = "UPDATE_COMPLETE",
        timeout: float = 120,
    ) -> dict[str, Any]:
        """Update *name* to *template* with *params* (202) and wait until it settles as *expect*."""
        text = template.read_text() if isinstance(template, Path) else template
        resp = self.api("PUT", f"/v1/stacks/{name}", {"template": text, "parameters": params or {}})
        assert 202 == resp.status, resp.body
        return self.settled(name, expect, timeout)

    def stack_action(self, name: str, action: str, *, timeout: float = 120) -> dict[str, Any]:
        """POST suspend or resume (202) and wait for ACTION_COMPLETE."""
        resp = self.api("POST", f"/v1/stacks/{name}/{action}")
        assert 202 == resp.status, resp.body
        return self.settled(name, f"{action.upper()}_COMPLETE", timeout)

    def delete_stack(self, name: str, *, timeout: float = 120) -> None:
        """Delete *name* (202) and wait until it is gone."""
        resp = self.api("DELETE", f"/v1/stacks/{name}")
        assert 202 == resp.status, resp.body
        self.settled(name, "DELETED", timeout)

    def wait_enrolled(self, server: str, timeout: float = 60) -> None:
        """Poll until the server's agent has enrolled (bounded in time)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.api("GET", f"/v1/servers/{server}").body.get("status") == "ENROLLED":
                return
            time.sleep(0.2)
        raise AssertionError(f"server {server} did not enrol within {timeout} s; log: {self.log}")

    def outputs(self, name: str) -> dict[str, Any]:
        return {
            o["output_key"]: o["output_value"] for o in self.api("GET", f"/v1/stacks/{name}/outputs").body
        }

    def agent_dir(self, server_name: str) -> Path:
        return self.data_dir / "agents" / server_name


def wait_until(check: Callable[[], T], what: str, timeout: float = 60, interval: float = 0.2) -> T:
    """Poll *check* until it returns something truthy, and return that; fail naming *what* after *timeout* s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise AssertionError(f"after {timeout:g} s: {what}")


def wait_file(path: Path, timeout: float = 60) -> None:
    """Wait until *path* exists (a hook's marker file), bounded in time."""
    wait_until(path.exists, f"{path} does not exist", timeout, interval=0.05)


def software_deployment(
    name: str,
    inputs: str,
    *,
    actions: str | None = None,
    config: str = "cfg",
    server: str = "srv",
    depends_on: str | None = None,
    extra: str = "",
) -> str:
    """The HOT text of one `OS::Heat::SoftwareDeployment` under `resources:`.

    *inputs* is the flow map inside `input_values: {...}`; *actions* the list inside
    `actions: [...]` (None: Heat's default); *extra* more property lines, indented.
    """
    lines = [
        f"  {name}:",
        "    type: OS::Heat::SoftwareDeployment",
        *([f"    depends_on: {depends_on}"] if depends_on else []),
        "    properties:",
        f"      config: {{get_resource: {config}}}",
        f"      server: {{get_resource: {server}}}",
        *([f"      actions: [{actions}]"] if actions is not None else []),
        f"      input_values: {{{inputs}}}",
    ]
    return "\n".join(lines) + "\n" + extra


def start_control_plane(
    tmp: Path, *extra: str, port: int | None = None, env: dict[str, str] | None = None
) -> ControlPlane:
    """Start `anneal serve` on loopback; the same *tmp* and *port* restart it on its data.

    *env* is added to the environment of the control plane and so of its local agents.
    """
    port = port or free_port()
    data_dir = tmp / "data"
    log = tmp / "control.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                str(BIN / "anneal"),
                "serve",
                "--data-dir",
                str(data_dir),
                "--listen",
                f"127.0.0.1:{port}",
                "--provisioner",
                "local",
                "--agent-arg=--poll-wait=5",
                "--agent-arg=--heartbeat-interval=2",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"control plane exited: {log.read_text()}")
        try:
            urllib.request.urlopen(url + "/v1/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    token = (data_dir / "admin-token").read_text().strip()
    return ControlPlane(url, token, data_dir, proc, log)


def stop_control_plane(cp: ControlPlane) -> None:
    if cp.proc.poll() is None:
        cp.proc.send_signal(signal.SIGTERM)
        try:
            cp.proc.wait(30)
        except subprocess.TimeoutExpired:
            cp.proc.kill()
            cp.proc.wait()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One throw-away PostgreSQL cluster for the whole run; each test takes a fresh database."""
    with running_postgres() as pg:
        yield pg


@pytest.fixture(params=["sqlite", "postgresql"])
def db_args(request: pytest.FixtureRequest) -> list[str]:
    """`anneal serve` arguments for each database: SQLite in the data dir, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return []
    pg: Postgres = request.getfixturevalue("postgres")
    return ["--db", pg.new_database()]


@pytest.fixture
def control_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    cp = start_control_plane(tmp_path)
    yield cp
    stop_control_plane(cp)
