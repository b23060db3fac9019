"""The script hook as a real subprocess (``python -m hooks.script``) with /bin/sh and python3."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from agent import wire
from tests.support.hookrun import pid_is_alive
from tests.support.processes import ROOT
from tests.support.waiting import wait_until

#: Bounds every wait, so that a broken hook fails a test instead of hanging it.
BOUND = 60
SECRET = "s3cr3t-Value-9f2c"


def deployment(
    config: object,
    *,
    inputs: Iterable[tuple[str, object]] = (),
    outputs: Iterable[str] = (),
    options: dict[str, object] | None = None,
    id: str = "c1",
) -> dict[str, Any]:
    return {
        "id": id,
        "name": "deploy",
        "group": "script",
        "creation_time": "2024-01-01T00:00:00Z",
        "config": config,
        "inputs": [{"name": n, "type": "String", "value": v} for n, v in inputs],
        "outputs": [{"name": n, "type": "String", "error_output": False} for n in outputs],
        "options": options or {},
    }


def hook_env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANNEAL_", "HEAT_"))}
    return {**env, "ANNEAL_HOOK_WORKDIR": str(workdir), "PYTHONPATH": str(ROOT)}


def run_hook(workdir: Path, stdin: bytes | dict[str, Any]) -> subprocess.CompletedProcess[str]:
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    return subprocess.run(
        [sys.executable, "-m", "hooks.script"],
        input=data.decode(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=hook_env(workdir),
        timeout=BOUND,
        check=False,
    )


def signal_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The hook's stdout as one JSON object, checked against the wire schema."""
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    wire.decode_signal(result)
    return result


@pytest.fixture
def work(tmp_path):
    return tmp_path / "work"


def live_members(pgid: int) -> list[int]:
    """Processes of group *pgid* that are alive (zombies are dead: only their parent can reap)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry.name))
    return alive


# ---------------------------------------------------------------- results


def test_exit_status_output_and_stderr_are_reported(work):
    """The script's exit status, stdout and stderr become the signal's deploy_* fields."""
    result = signal_of(run_hook(work, deployment("echo hello\necho oops >&2\nexit 3\n")))
    assert result == {"deploy_stdout": "hello\n", "deploy_stderr": "oops\n", "deploy_status_code": 3}


def test_outputs_are_read_from_files_and_removed(work):
    """Each declared output is the content of $heat_outputs_path.<name>, removed afterwards."""
    config = (
        'printf 42 > "$heat_outputs_path.result"\n'
        'printf "a\\nb" > "$heat_outputs_path.multi-line"\n'
        'echo "$heat_outputs_path" > prefix\n'
    )
    result = signal_of(run_hook(work, deployment(config, outputs=["result", "multi-line", "unset"])))
    assert result == {
        "result": "42",
        "multi-line": "a\nb",
        "deploy_stdout": "",
        "deploy_stderr": "",
        "deploy_status_code": 0,
    }
    prefix = Path((work / "script" / "working" / "prefix").read_text().strip())
    assert prefix.name == "c1"
    assert list(prefix.parent.iterdir()) == []


def test_inputs_are_environment_variables(work):
    """String inputs come as is, numbers and structures as JSON, null as an empty string."""
    inputs = [
        ("text", "hello world"),
        ("number", 42),
        ("json", {"a": [1, True]}),
        ("nothing", None),
        ("flag", False),
    ]
    config = 'for n in text number json nothing flag; do eval "echo $n=[\\$$n]"; done'
    result = signal_of(run_hook(work, deployment(config, inputs=inputs)))
    assert result["deploy_stdout"].splitlines() == [
        "text=[hello world]",
        "number=[42]",
        'json=[{"a": [1, true]}]',
        "nothing=[]",
        "flag=[false]",
    ]


def test_config_is_written_private_and_run_in_working_dir(work):
    """The config is written to <working_dir>/<id> with mode 0700 and runs there."""
    result = signal_of(run_hook(work, deployment('pwd; echo "$0"', id="my-id")))
    working = work / "script" / "working"
    assert result["deploy_stdout"] == f"{working}\n{working / 'my-id'}\n"
    assert (working / "my-id").stat().st_mode & 0o777 == 0o700


def test_invalid_input_names_are_skipped_without_their_values(work):
    """An input name that cannot be an environment variable is skipped with a note, no value."""
    proc = run_hook(work, deployment("env", inputs=[("bad-name", SECRET), ("ok", "yes")]))
    result = signal_of(proc)
    assert "'bad-name'" in result["deploy_stderr"]
    assert "ok=yes" in result["deploy_stdout"]
    assert SECRET not in proc.stdout + proc.stderr


# ---------------------------------------------------------------- interpreters


def test_python_shebang_is_honoured(work):
    """A '#!<python>' script runs under that interpreter."""
    config = f"#!{sys.executable}\nimport sys\nprint(sys.version_info[0])\nsys.exit(5)\n"
    result = signal_of(run_hook(work, deployment(config)))
    assert (result["deploy_stdout"], result["deploy_status_code"]) == ("3\n", 5)


def test_env_shebang_finds_python3_on_path(work):
    """'#!/usr/bin/env python3' runs python3 found on PATH."""
    config = "#!/usr/bin/env python3\nimport os\nprint(os.environ['who'])\n"
    result = signal_of(run_hook(work, deployment(config, inputs=[("who", "python")])))
    assert (result["deploy_stdout"], result["deploy_status_code"]) == ("python\n", 0)


def test_shebang_argument_is_passed(work):
    """The rest of the '#!' line is passed to the interpreter, as the kernel does."""
    result = signal_of(run_hook(work, deployment("#!/bin/sh -e\nfalse\necho not reached\n")))
    assert (result["deploy_stdout"], result["deploy_status_code"]) == ("", 1)


def test_script_without_shebang_runs_with_sh(work):
    """A script without '#!' runs with /bin/sh."""
    result = signal_of(run_hook(work, deployment("echo $0 | grep -c c1")))
    assert (result["deploy_stdout"], result["deploy_status_code"]) == ("1\n", 0)


@pytest.mark.parametrize("shebang", ["/nonexistent/python", "/usr/bin/env no-such-interpreter-anneal", ""])
def test_missing_interpreter_is_a_127_failure(work, tmp_path, shebang):
    """A '#!' interpreter that does not exist gives status 127 and names it; nothing runs."""
    marker = tmp_path / "ran"
    result = signal_of(run_hook(work, deployment(f"#!{shebang}\ntouch {marker}\n")))
    assert result["deploy_status_code"] == 127
    assert result["deploy_stderr"] == f"script interpreter '{shebang}' not found"
    assert not marker.exists()


# ---------------------------------------------------------------- refusals


def test_empty_config_is_a_successful_no_op(work):
    """An empty or whitespace-only config succeeds with status 0 and runs nothing."""
    for config in ("", "  \n\t\n", None):
        result = signal_of(run_hook(work, deployment(config)))
        assert result == {"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}


def test_map_config_is_a_failure_naming_its_type(work):
    """A config that is a map, not a script, is a failure that says so."""
    result = signal_of(run_hook(work, deployment({"echo": "hi"})))
    assert result["deploy_status_code"] == 1
    assert "got a map" in result["deploy_stderr"]


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "x/../../y"])
def test_unsafe_output_name_is_refused(work, tmp_path, name):
    """An unsafe output name fails the deployment before anything runs or is written outside."""
    marker = tmp_path / "ran"
    config = f'touch {marker}; echo x > "$heat_outputs_path.{name}"'
    result = signal_of(run_hook(work, deployment(config, outputs=["fine", name])))
    assert result["deploy_status_code"] != 0
    assert repr(name) in result["deploy_stderr"]
    assert "not safe" in result["deploy_stderr"]
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert [p for p in work.rglob("*") if p.is_file()] == []


def test_unsafe_deployment_id_is_refused(work, tmp_path):
    """A deployment id that is not safe in a file name is a failure; nothing is written."""
    result = signal_of(run_hook(work, deployment("echo hi", id="../../evil")))
    assert result["deploy_status_code"] == 1
    assert "'../../evil'" in result["deploy_stderr"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert [p for p in work.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("stdin", [b"", b"{not json", b'{"config": "echo no id"}'])
def test_bad_stdin_exits_2_with_a_message(work, stdin):
    """stdin without a readable deployment: exit 2, a message on stderr, nothing on stdout."""
    proc = run_hook(work, stdin)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "no deployment to run" in proc.stderr


def test_invalid_options_timeout_is_a_failure_naming_it(work):
    """A timeout option that is not a positive number is a failure naming options.timeout."""
    result = signal_of(run_hook(work, deployment("echo hi", options={"timeout": "soon"})))
    assert result["deploy_status_code"] == 1
    assert "options.timeout" in result["deploy_stderr"]
    assert result["deploy_stdout"] == ""


# ---------------------------------------------------------------- processes


def test_timeout_kills_the_whole_process_group(work, tmp_path):
    """At the timeout the script and every child in its group are stopped; status 124."""
    pids = tmp_path / "pids"
    config = (
        f"echo $$ > {pids}\n"
        f"sleep 300 & echo $! >> {pids}\n"
        f"sh -c 'sleep 300' & echo $! >> {pids}\n"
        "echo started\nwait\n"
    )
    result = signal_of(run_hook(work, deployment(config, options={"timeout": 1})))
    assert result["deploy_status_code"] == 124
    assert result["deploy_stderr"].endswith("timed out after 1 s")
    assert result["deploy_stdout"] == "started\n"
    leader, *children = (int(p) for p in pids.read_text().split())
    wait_until(lambda: live_members(leader) == [], "the script's group to end", BOUND, 0.05)
    assert not any(pid_is_alive(pid) for pid in children)


def test_daemon_with_its_own_stdio_does_not_block(work, tmp_path):
    """A background process that redirects its stdio outlives the script without delaying it."""
    pidfile = tmp_path / "daemon"
    config = f"sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > {pidfile}\necho done\n"
    result = signal_of(run_hook(work, deployment(config)))
    pid = int(pidfile.read_text())
    try:
        assert result == {"deploy_stdout": "done\n", "deploy_stderr": "", "deploy_status_code": 0}
        assert pid_is_alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_child_holding_stdout_open_does_not_outlast_the_timeout(work, tmp_path):
    """A background child that keeps stdout open is stopped at the timeout; the hook returns."""
    pidfile = tmp_path / "child"
    config = f"sleep 300 &\necho $! > {pidfile}\necho started\nexit 0\n"
    result = signal_of(run_hook(work, deployment(config, options={"timeout": 1})))
    assert result["deploy_status_code"] == 0
    assert result["deploy_stdout"] == "started\n"
    assert "held the output open" in result["deploy_stderr"]
    wait_until(lambda: not pid_is_alive(int(pidfile.read_text())), "the child to be stopped", BOUND, 0.05)


def test_sigterm_to_the_hook_stops_the_script_and_reports(work, tmp_path):
    """SIGTERM to the hook stops the script's group and still writes a failure result."""
    leader_file = tmp_path / "leader"
    config = f"echo $$ > {leader_file}.tmp; mv {leader_file}.tmp {leader_file}; sleep 300\n"
    stdin = tmp_path / "deployment.json"
    stdin.write_text(json.dumps(deployment(config)))
    with stdin.open("rb") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hooks.script"],
            stdin=f,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=hook_env(work),
        )
    try:
        wait_until(leader_file.exists, "the script to start", BOUND, 0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=BOUND)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["deploy_status_code"] == 143
    assert "SIGTERM" in result["deploy_stderr"]
    wait_until(
        lambda: live_members(int(leader_file.read_text())) == [], "the script's group to end", BOUND, 0.05
    )


# ---------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    "config",
    ["exit 1", "#!/nonexistent/sh\n", "sleep 30", {"not": "a script"}],
    ids=["fails", "no-interpreter", "times-out", "bad-config"],
)
def test_input_values_never_reach_the_hook_logs(work, config):
    """Input values reach neither the hook's stderr nor the result unless the script prints them."""
    inputs = [("password", SECRET), ("bad name", SECRET), ("nested", {"key": SECRET})]
    proc = run_hook(work, deployment(config, inputs=inputs, options={"timeout": 0.5}))
    signal_of(proc)
    assert SECRET not in proc.stderr
    assert SECRET not in proc.stdout


def test_a_script_may_print_its_own_inputs(work):
    """A value the script prints itself is in deploy_stdout and in the streamed output only.

    The hook's stderr carries the tool's output as it comes (for progress) and the hook's
    log lines; the log lines never show it.
    """
    proc = run_hook(work, deployment('echo "$password"', inputs=[("password", SECRET)]))
    assert signal_of(proc)["deploy_stdout"] == f"{SECRET}\n"
    assert f"{SECRET}\n" in proc.stderr
    logs = [line for line in proc.stderr.splitlines() if " hooks." in line]
    assert logs
    assert not [line for line in logs if SECRET in line]
