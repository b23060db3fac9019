"""A real control plane: `anneal serve` as a subprocess on loopback, and a client for its API and CLI.

Tests, `bench/` and `examples/demo.py` start it the same way; only the defaults differ
(tests: local agents that long-poll 2 s and beat every 2 s).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import zygote
from tests.support.processes import command, free_port, stop_process
from tests.support.waiting import wait_until

#: What the tests run with unless they say otherwise: local agents, quick to poll and to beat.
#: A short long-poll also makes the stop quick: `anneal serve` lets the polls under way end first.
TEST_DEFAULTS = (
    "--provisioner",
    "local",
    "--agent-arg=--poll-wait=2",
    "--agent-arg=--heartbeat-interval=2",
)


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
    proc: zygote.Process
    log: Path

    @property
    def port(self) -> int:
        """The loopback port it listens on (a restart on the same port keeps the agents' URL)."""
        return int(self.url.rsplit(":", 1)[1])

    def crash(self) -> None:
        """kill -9: no graceful shutdown, as a crash of the machine or the process."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "ANNEAL_URL": self.url,
            "ANNEAL_TOKEN": self.token,
            "ANNEAL_CONFIG": "/nonexistent",
        }

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the installed `anneal` command against this control plane (forked from the zygote in a test)."""
        argv, env = [command("anneal"), *args], self.env()
        if zygote.forkable(argv):
            return zygote.ZYGOTE.run(argv, env, timeout)
        return subprocess.run(argv, env=env, text=True, capture_output=True, timeout=timeout, check=False)

    def cli_here(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`anneal *args*` run by this process: the command's own code (control.cli.main) against this control
        plane, its output captured; for a test that reads the same command's output in many formats, which a
        process each would only make slower (about 0.15 s of CPU to start one)."""
        from control.cli import main  # here: bench/ and the demo load this module without it

        out, err = io.StringIO(), io.StringIO()
        saved = {name: os.environ.get(name) for name in ("ANNEAL_URL", "ANNEAL_TOKEN", "ANNEAL_CONFIG")}
        os.environ.update({name: self.env()[name] for name in saved})
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        return subprocess.CompletedProcess(["anneal", *args], code, out.getvalue(), err.getvalue())

    def clis(
        self, commands: Sequence[Sequence[str]], parallel: int = 4
    ) -> list[subprocess.CompletedProcess[str]]:
        """Run several `anneal` commands, at most *parallel* at once (each its own process); results in order."""
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            return list(pool.map(lambda args: self.cli(*args), commands))

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
        """Poll until the stack leaves IN_PROGRESS (bounded in time); a deleted stack is DELETED."""

        def left() -> dict[str, Any] | None:
            resp = self.api("GET", f"/v1/stacks/{name}")
            if resp.status == 404:
                return {"status": "DELETED"}
            return None if resp.body["status"].endswith("IN_PROGRESS") else dict(resp.body)

        try:
            return wait_until(left, f"stack {name} still in progress; log: {self.log}", timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.stuck_report(name)}") from None

    def stuck_report(self, name: str) -> str:
        """What a failed wait shows: the stack's unfinished deployments and the log's last lines."""
        deps = self.api("GET", f"/v1/deployments?stack={name}").body
        unfinished = [
            f"{d.get('name')} on {d.get('server_name', d.get('server_id'))}: {d.get('status')}"
            for d in (deps if isinstance(deps, list) else [])
            if d.get("status") != "COMPLETE"
        ]
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "unfinished deployments: {}\nlast lines of the log:\n{}".format(
            unfinished, "\n".join(lines[-40:])
        )

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
        wait_until(
            lambda: self.api("GET", f"/v1/servers/{server}").body.get("status") == "ENROLLED",
            f"server {server} did not enrol; log: {self.log}",
            timeout,
        )

    def outputs(self, name: str) -> dict[str, Any]:
        return {
            o["output_key"]: o["output_value"] for o in self.api("GET", f"/v1/stacks/{name}/outputs").body
        }

    def agent_dir(self, server_name: str) -> Path:
        """The state dir of the server's agent.

        `agents/<name>` when a test made it for an agent it runs itself (and before the server
        exists, for the test to make); else the local provisioner's, named by the server's id.
        """
        by_name = self.data_dir / "agents" / server_name
        if by_name.is_dir():
            return by_name
        found = self.api("GET", f"/v1/servers/{server_name}")
        if found.status == 404:
            return by_name
        assert 200 == found.status, f"server {server_name}: {found.body}"
        return self.data_dir / "agents" / str(found.body["id"])


def start_control_plane(
    tmp: Path,
    *extra: str,
    port: int | None = None,
    env: dict[str, str] | None = None,
    defaults: Sequence[str] = TEST_DEFAULTS,
    wrap: Sequence[str] = (),
    exec_: bool = False,
) -> ControlPlane:
    """Start `anneal serve` on loopback with its data in *tmp*; the same *tmp* and *port* restart it on its data.

    *extra* follows *defaults* on the command line (so it wins); *env* is added to the
    environment of the control plane and so of its local agents; *wrap* prefixes the
    command (e.g. `taskset -c 1`, which execs: the PID stays the control plane's). The
    process is forked from this worker's zygote (tests/support/zygote.py) unless *exec_*
    asks for the command's own exec (a test reading its /proc/PID/environ or cmdline).
    """
    port = port or free_port()
    data_dir = tmp / "data"
    log = tmp / "control.log"
    argv = [
        command("anneal"),
        "serve",
        "--data-dir",
        str(data_dir),
        "--listen",
        f"127.0.0.1:{port}",
        *defaults,
        *extra,
    ]
    proc: zygote.Process
    if not exec_ and zygote.forkable(argv, env, wrap):
        proc = zygote.ZYGOTE.spawn(argv, log, {**os.environ, **(env or {})})
    else:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*wrap, *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        """Ours answers: a server on the port that refuses our admin token is another test's."""
        if proc.poll() is not None:
            raise AssertionError(f"control plane exited: {log.read_text()}")
        token = data_dir / "admin-token"
        if not token.exists():
            return False
        ask = urllib.request.Request(
            url + "/v1/stacks", headers={"Authorization": f"Bearer {token.read_text().strip()}"}
        )
        try:
            with urllib.request.urlopen(ask, timeout=1):
                return True
        except OSError:  # not listening yet, or another's (401): ours exits if it cannot bind
            return False

    try:
        wait_until(up, f"control plane not up; log: {log}", 30, interval=0.1)
    except AssertionError:
        stop_process(proc)
        raise
    token = (data_dir / "admin-token").read_text().strip()
    return ControlPlane(url, token, data_dir, proc, log)


def serve_once(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `anneal serve *args*` on a fresh data dir in *tmp* and a free port, expecting it to refuse and exit."""
    argv = [
        command("anneal"),
        "serve",
        "--data-dir",
        str(tmp / "data"),
        "--listen",
        f"127.0.0.1:{free_port()}",
    ]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60, check=False)


def stop_control_plane(cp: ControlPlane) -> None:
    """SIGTERM the control plane (it stops its local agents), SIGKILL it after 30 s."""
    stop_process(cp.proc)


@contextlib.contextmanager
def two_planes(
    tmp: Path, *extra: str, defaults: Sequence[str] = TEST_DEFAULTS
) -> Iterator[tuple[ControlPlane, ControlPlane]]:
    """Two `anneal serve` processes on one database and one data dir (keys, admin token), stopped after."""
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    a = start_control_plane(tmp / "a", *extra, defaults=defaults)
    (tmp / "b" / "data").symlink_to(tmp / "a" / "data")
    try:
        b = start_control_plane(tmp / "b", *extra, defaults=defaults)
    except BaseException:
        stop_control_plane(a)
        raise
    try:
        yield a, b
    finally:
        stop_control_plane(b)
        stop_control_plane(a)
