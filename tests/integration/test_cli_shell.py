"""The CLI in the shell: names that are quick to type, deletes that get unstuck, output a program or a terminal reads.

Everything runs through the installed `anneal` command against a real control plane with
real local agents; a server that never comes back is an agent frozen with SIGSTOP (then
killed, as a machine that died).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import struct
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import command
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$")
FORCED = "skipped by `anneal stack delete --force`"

MANY = "\n".join(
    [
        "heat_template_version: rocky",
        "resources:",
        "  box: {type: OS::Heat::DeployedServer, properties: {name: many-box}}",
        "  cfg: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: 'true'}}",
        *(
            f"  dep{i}: {{type: OS::Heat::SoftwareDeployment, properties: "
            "{config: {get_resource: cfg}, server: {get_resource: box}, signal_transport: NO_SIGNAL}}"
            for i in range(17)
        ),
    ]
)


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("cli-shell"))
    yield plane
    stop_control_plane(plane)


def _ok(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, (run.stdout, run.stderr)
    return run.stdout


def _json(cp: ControlPlane, *args: str) -> Any:
    return json.loads(_ok(cp.cli(*args, "-f", "json")))


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _deploy(cp: ControlPlane, work: Path, name: str, server_name: str | None = None) -> None:
    template = work / f"{name}.yaml"
    template.write_text(one_script_deployment("#!/bin/sh\necho ran\n", server_name=server_name))
    _ok(cp.cli("stack", "create", name, "-t", str(template), "--wait"))


def test_deployment_is_named_by_unique_id_prefix_or_stack_slash_resource(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """`deployment show` takes a unique id prefix or STACK/RESOURCE; an ambiguous prefix lists its candidates."""
    (tmp_path / "many.yaml").write_text(MANY)
    _ok(cp.cli("stack", "create", "many", "-t", str(tmp_path / "many.yaml"), "--wait"))
    ids = sorted(d["id"] for d in _json(cp, "deployment", "list", "--stack", "many"))
    assert len(ids) == 17
    unique = next(i[:n] for i in ids for n in range(1, 37) if sum(j.startswith(i[:n]) for j in ids) == 1)
    assert _json(cp, "deployment", "show", unique)["id"] == next(i for i in ids if i.startswith(unique))
    by_name = _json(cp, "deployment", "show", "many/dep3")
    assert by_name["resource_name"] == "dep3" and by_name["id"] in ids
    # 17 ids, 16 hex digits: two share their first character.
    shared = next(i[0] for i in ids if sum(j.startswith(i[0]) for j in ids) > 1)
    ambiguous = cp.cli("deployment", "show", shared)
    assert ambiguous.returncode == 1
    assert "ambiguous" in ambiguous.stderr and "HTTP 400" in ambiguous.stderr
    for candidate in (i for i in ids if i.startswith(shared)):
        assert candidate in ambiguous.stderr
    missing = cp.cli("deployment", "show", "many/nosuch")
    assert missing.returncode == 1 and "no deployment resource named 'nosuch'" in missing.stderr
    assert cp.api("GET", f"/v1/deployments/{unique}").body["id"].startswith(unique)


def test_server_delete_is_refused_while_a_stack_uses_it_and_force_releases_it(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """`server delete` answers 409 naming the stack that uses the server; --force deletes it all the same."""
    _deploy(cp, tmp_path, "holder", server_name="held-box")
    refused = cp.cli("server", "delete", "held-box")
    assert refused.returncode == 1
    assert "used by stack holder" in refused.stderr and "HTTP 409" in refused.stderr
    assert cp.api("GET", "/v1/servers/held-box").status == 200
    forced = _json(cp, "server", "delete", "held-box", "--force")
    assert forced["name"] == "held-box" and forced["released_from"] == ["holder"]
    assert cp.api("GET", "/v1/servers/held-box").status == 404
    _ok(cp.cli("server", "create", "spare-box"))
    said = _ok(cp.cli("server", "delete", "spare-box"))
    assert "server spare-box" in said and "deleted" in said
    assert cp.api("GET", "/v1/servers/spare-box").status == 404


def _freeze_agent(cp: ControlPlane, server: str) -> int:
    pid = int((cp.agent_dir(server) / "agent.pid").read_text())
    os.kill(pid, signal.SIGSTOP)  # the server never comes back
    return pid


def _kill(pid: int) -> None:
    """The frozen agent dies as its machine would (it is ours: its control plane started it)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_stack_delete_force_unsticks_a_delete_waiting_for_a_dead_server(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A delete stuck on a dead server's DELETE config completes with `--force`: skipped, with a WARNING event."""
    marker = tmp_path / "delete-ran"
    template = tmp_path / "stuck.yaml"
    template.write_text(
        one_script_deployment(
            f'#!/bin/sh\nif [ "$deploy_action" = DELETE ]; then touch {marker}; fi\n',
            actions="CREATE, DELETE",
            server_name="stuck-box",
        )
    )
    _ok(cp.cli("stack", "create", "stuck", "-t", str(template), "--wait"))
    pid = _freeze_agent(cp, "stuck-box")
    try:
        _ok(cp.cli("stack", "delete", "stuck"))

        def waiting() -> bool:
            deps = cp.api("GET", "/v1/deployments?stack=stuck").body
            return any(d["action"] == "DELETE" and d["status"] == "IN_PROGRESS" for d in deps)

        wait_until(waiting, "the DELETE config never started", 30)
        out = _ok(cp.cli("stack", "delete", "stuck", "--force", "--wait", "--timeout", "60"))
        assert "stack stuck deleted" in out
        events = _json(cp, "stack", "events", "stuck")
        warnings = [e for e in events if e["status"] == "WARNING" and e["resource_name"] == "dep"]
        assert len(warnings) == 1 and FORCED in warnings[0]["reason"] and "stuck-box" in warnings[0]["reason"]
    finally:
        _kill(pid)
    assert not marker.exists()


def test_stack_delete_force_skips_delete_configs_before_they_start(cp: ControlPlane, tmp_path: Path) -> None:
    """`stack delete --force` on a stack whose server is dead skips its DELETE configs at once, each with a WARNING."""
    marker = tmp_path / "delete-ran"
    template = tmp_path / "dead.yaml"
    template.write_text(
        one_script_deployment(
            f'#!/bin/sh\nif [ "$deploy_action" = DELETE ]; then touch {marker}; fi\n',
            actions="CREATE, DELETE",
            server_name="dead-box",
        )
    )
    _ok(cp.cli("stack", "create", "dead", "-t", str(template), "--wait"))
    pid = _freeze_agent(cp, "dead-box")
    try:
        out = _ok(cp.cli("stack", "delete", "dead", "--force", "--wait", "--timeout", "60"))
        assert re.search(
            r"dep\s+DELETE_WARNING: DELETE not run on server dead-box: " + re.escape(FORCED), out
        ), out
        assert "stack dead deleted" in out
    finally:
        _kill(pid)
    assert not marker.exists()


def test_stack_events_filter_by_resource_and_time_and_page_with_limit(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """`stack events` keeps one resource's events with --resource, from a time with --since, and pages with --limit/--after."""
    _deploy(cp, tmp_path, "paged")
    every = _json(cp, "stack", "events", "paged")
    assert len(every) >= 4 and all(ISO.match(e["timestamp"]) for e in every)
    dep = _json(cp, "stack", "events", "paged", "--resource", "dep")
    assert dep and {e["resource_name"] for e in dep} == {"dep"}
    assert len(dep) < len(every)
    assert _json(cp, "stack", "events", "paged", "--since", "2999-01-01T00:00:00Z") == []
    assert [e["id"] for e in _json(cp, "stack", "events", "paged", "--since", "1h")] == [
        e["id"] for e in every
    ]
    bad = cp.cli("stack", "events", "paged", "--since", "yesterday")
    assert bad.returncode == 1 and "--since" in bad.stderr
    first = cp.cli("stack", "events", "paged", "--limit", "2", "-f", "json")
    page = json.loads(_ok(first))
    assert [e["id"] for e in page] == [e["id"] for e in every[:2]]
    hint = re.search(r"more events: (anneal stack events .*)", first.stderr)
    assert hint is not None and f"--after {page[-1]['id']}" in hint[1]
    rest = _json(cp, *hint[1].split()[1:])
    assert [e["id"] for e in rest] == [e["id"] for e in every[2:4]]


def test_wait_and_follow_print_json_lines_with_iso_times(cp: ControlPlane, tmp_path: Path) -> None:
    """With -f json, `--wait` and `events --follow` print one JSON object per line, times in ISO 8601."""
    template = tmp_path / "lines.yaml"
    template.write_text(one_script_deployment("#!/bin/sh\necho ran\n"))
    lines = _lines(_ok(cp.cli("stack", "create", "lines", "-t", str(template), "--wait", "-f", "json")))
    kinds = [line["kind"] for line in lines]
    assert kinds[0] == "started" and kinds[-1] == "result" and "event" in kinds and "progress" in kinds
    assert lines[-1]["status"] == "CREATE_COMPLETE" and lines[-1]["failures"] == []
    assert all(ISO.match(line["timestamp"]) for line in lines if line["kind"] == "event")
    assert ISO.match(lines[0]["stack"]["created_at"])
    final = [line for line in lines if line["kind"] == "progress"][-1]
    assert final["done"] == final["total"] == 3 and final["failed"] == 0
    followed = _lines(_ok(cp.cli("stack", "events", "lines", "--follow", "-f", "json")))
    assert followed[-1] == {**followed[-1], "kind": "result", "status": "CREATE_COMPLETE"}
    assert {e["id"] for e in followed if e["kind"] == "event"} >= {
        e["id"] for e in lines if e["kind"] == "event"
    }
    shown = _json(cp, "stack", "show", "lines")
    assert ISO.match(shown["created_at"]) and ISO.match(shown["updated_at"])


def test_wait_progress_is_plain_lines_off_a_terminal_and_one_live_line_on_one(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """`--wait` prints plain progress lines (done/total, failures, rate, ETA) off a terminal, a rewritten line on one."""
    template = tmp_path / "prog.yaml"
    template.write_text(one_script_deployment("#!/bin/sh\necho ran\n"))
    plain = cp.cli("stack", "create", "prog", "-t", str(template), "--wait")
    _ok(plain)
    assert re.search(r"^progress: 3/3 done, 0 failed, \d+ running, [\d.]+/s, ETA \S+$", plain.stderr, re.M), (
        plain.stderr
    )
    assert "\x1b" not in plain.stderr and "progress" not in plain.stdout
    primary, secondary = os.openpty()
    try:
        run = subprocess.run(
            [command("anneal"), "stack", "update", "prog", "-t", str(template), "--wait"],
            env=cp.env(),
            stdout=subprocess.PIPE,
            stderr=secondary,
            text=True,
            timeout=120,
            check=False,
        )
        os.close(secondary)
        seen = b""
        while chunk := _read(primary):
            seen += chunk
    finally:
        os.close(primary)
    assert run.returncode == 0, run.stdout
    assert b"\r\x1b[K" in seen and b"progress: " in seen, seen


def _on_terminal(cp: ControlPlane, args: list[str], columns: int) -> bytes:
    """What `anneal *args*` prints with its stdout on a terminal *columns* wide."""
    env = {k: v for k, v in cp.env().items() if k not in ("COLUMNS", "LINES")}  # the terminal's own size
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        run = subprocess.run(
            [command("anneal"), *args],
            env=env,
            stdout=secondary,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
        os.close(secondary)
        seen = b""
        while chunk := _read(primary):
            seen += chunk
    finally:
        os.close(primary)
    assert run.returncode == 0, run.stderr
    return seen.replace(b"\r\n", b"\n")


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the other end is closed
        return b""


def test_tables_fit_the_terminal_width_and_mark_cut_text(cp: ControlPlane, tmp_path: Path) -> None:
    """Tables honour the terminal's width (COLUMNS here) and end cut text with '…'."""
    _deploy(cp, tmp_path, "a-stack-with-a-rather-long-name-for-tables")
    seen = _on_terminal(cp, ["stack", "list"], columns=60).decode()
    lines = [line for line in seen.splitlines() if line.startswith(("+", "|"))]
    assert lines and max(len(line) for line in lines) <= 60, seen
    assert "…" in seen
    piped = subprocess.run(
        [command("anneal"), "stack", "list"],
        env={**cp.env(), "COLUMNS": "60"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )  # read by a program: nothing that fits MAX_COLUMN is cut
    assert "a-stack-with-a-rather-long-name-for-tables" in piped.stdout and "…" not in piped.stdout


def test_stack_graph_prints_the_dependency_graph_as_dot(cp: ControlPlane, tmp_path: Path) -> None:
    """`stack graph` prints DOT: a node per resource and edges labelled server, get_resource, get_attr, depends_on."""
    template = tmp_path / "graph.yaml"
    after = (
        "  after:\n    type: OS::Heat::Value\n    depends_on: [dep]\n"
        "    properties: {value: {get_attr: [dep, result]}}\n"
    )
    text = one_script_deployment("#!/bin/sh\necho ran\n", outputs=["result"])
    template.write_text(text.replace("\noutputs:\n", "\n" + after + "outputs:\n"))
    _ok(cp.cli("stack", "create", "graphed", "-t", str(template), "--wait"))
    dot = _ok(cp.cli("stack", "graph", "graphed"))
    assert dot.startswith('digraph "graphed" {') and dot.rstrip().endswith("}")
    nodes = re.findall(r'^  "([^"]+)" \[label="([^"]+)"', dot, re.M)
    assert sorted(n for n, _ in nodes) == ["after", "box", "cfg", "dep"]
    assert all("CREATE_COMPLETE" in label for _, label in nodes)
    edges = dict(
        ((a, b), k) for a, b, k in re.findall(r'^  "([^"]+)" -> "([^"]+)" \[label="([^"]+)"\];', dot, re.M)
    )
    assert edges == {
        ("dep", "box"): "server",
        ("dep", "cfg"): "get_resource",
        ("after", "dep"): "depends_on, get_attr",
    }
    assert cp.cli("stack", "graph", "nosuch").returncode == 1


def test_shell_completion_and_versions(cp: ControlPlane) -> None:
    """`anneal completion bash` completes subcommands in bash; zsh's is a compdef; both commands print versions."""
    script = _ok(cp.cli("completion", "bash"))
    probe = (
        'source /dev/stdin; COMP_WORDS=(anneal st); COMP_CWORD=1; COMP_LINE="anneal st"; COMP_POINT=9; '
        'fn=$(complete -p anneal | sed -n "s/.*-F \\([^ ]*\\) anneal$/\\1/p"); $fn; echo "${COMPREPLY[@]}"'
    )
    completed = subprocess.run(
        ["bash", "-c", probe], input=script, capture_output=True, text=True, timeout=30, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert set(completed.stdout.split()) == {"stack"}
    assert _ok(cp.cli("completion", "zsh")).startswith("#compdef anneal")
    for tool in ("anneal", "anneal-agent"):
        said = subprocess.run(
            [command(tool), "--version"], capture_output=True, text=True, timeout=30, check=True
        )
        assert re.fullmatch(rf"{tool} \d+\.\d+\.\d+\S*\n", said.stdout), said.stdout


def test_stopping_serve_answers_held_polls_stops_local_agents_and_says_so(tmp_path: Path) -> None:
    """On SIGTERM `anneal serve` answers its agents' held long-polls, stops them, logs each step and exits 0."""
    plane = start_control_plane(tmp_path, "--agent-arg=--poll-wait=60")
    try:
        template = tmp_path / "t.yaml"
        template.write_text(one_script_deployment("#!/bin/sh\necho ran\n"))
        _ok(plane.cli("stack", "create", "stopme", "-t", str(template), "--wait"))
        pid = int((plane.agent_dir("stopme-box") / "agent.pid").read_text())
    finally:
        plane.proc.send_signal(signal.SIGTERM)
        assert plane.proc.wait(60) == 0
    log = plane.log.read_text()
    assert re.search(r"stopping: \d+ held long-poll\(s\) answered, 1 local agent\(s\) told to stop", log), log
    assert "stopped: engine, publishers, local agents and database closed" in log
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), "the local agent outlived its control plane", 30)
