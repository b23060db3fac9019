"""The plumbing shared by every hook: context, private files, outputs, tools and main()."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import wire, wire_caps
from agent.proctree import stat_fields
from agent.wire import DeploymentItem, OutputItem, Signal
from hooks import common
from hooks.common import (
    HookContext,
    check_names,
    clear_outputs,
    failure,
    main,
    output_path,
    read_outputs,
    run_tool,
    write_private,
)
from hooks.errors import ConfigError, OptionError, TerminatedError, ToolNotFoundError
from tests.support.waiting import wait_until


def item(**fields: Any) -> DeploymentItem:
    fields.setdefault("id", "d1")
    return DeploymentItem(name="n", group="script", creation_time="", **fields)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ---------------------------------------------------------------- HookContext


def test_context_uses_anneal_workdir_per_hook(tmp_path):
    """ANNEAL_HOOK_WORKDIR gives each hook private working and outputs dirs under <base>/<name>."""
    ctx = HookContext.from_env("script", item(), {"ANNEAL_HOOK_WORKDIR": str(tmp_path)})
    assert ctx.name == "script"
    assert ctx.working_dir.parent == tmp_path / "script"
    assert ctx.outputs_dir.parent == tmp_path / "script"
    assert ctx.working_dir != ctx.outputs_dir
    for directory in (tmp_path / "script", ctx.working_dir, ctx.outputs_dir):
        assert mode(directory) == 0o700


def test_context_falls_back_to_heat_variables(tmp_path):
    """Without ANNEAL_HOOK_WORKDIR the HEAT_<NAME>_WORKING/OUTPUTS variables name the dirs."""
    env = {
        "HEAT_DOCKER_COMPOSE_WORKING": str(tmp_path / "w"),
        "HEAT_DOCKER_COMPOSE_OUTPUTS": str(tmp_path / "o"),
    }
    ctx = HookContext.from_env("docker-compose", item(), env)
    assert (ctx.working_dir, ctx.outputs_dir) == (tmp_path / "w", tmp_path / "o")
    assert mode(tmp_path / "w") == mode(tmp_path / "o") == 0o700


def test_context_tightens_an_open_existing_dir(tmp_path):
    """A working dir left open by someone else is made 0700 again."""
    (tmp_path / "w").mkdir(mode=0o755)
    env = {"HEAT_SCRIPT_WORKING": str(tmp_path / "w"), "HEAT_SCRIPT_OUTPUTS": str(tmp_path / "o")}
    HookContext.from_env("script", item(), env)
    assert mode(tmp_path / "w") == 0o700


def test_timeout_comes_from_options_before_env(tmp_path):
    """options.timeout wins over ANNEAL_HOOK_TIMEOUT, which applies when the option is absent."""
    env = {"ANNEAL_HOOK_WORKDIR": str(tmp_path), "ANNEAL_HOOK_TIMEOUT": "90"}
    assert HookContext.from_env("script", item(options={"timeout": 5}), env).timeout == 5.0
    assert HookContext.from_env("script", item(options={}), env).timeout == 90.0
    del env["ANNEAL_HOOK_TIMEOUT"]
    assert HookContext.from_env("script", item(), env).timeout is None


@pytest.mark.parametrize("value", ["30", True, 0, -1, float("nan"), float("inf"), [1]])
def test_invalid_options_timeout_is_named(tmp_path, value):
    """An options.timeout that is not a positive number raises OptionError naming it."""
    env = {"ANNEAL_HOOK_WORKDIR": str(tmp_path)}
    with pytest.raises(OptionError, match=r"options\.timeout"):
        HookContext.from_env("script", item(options={"timeout": value}), env)


@pytest.mark.parametrize("text", ["soon", "-3", "nan"])
def test_invalid_env_timeout_is_named(tmp_path, text):
    """An ANNEAL_HOOK_TIMEOUT that is not a positive number raises OptionError naming it."""
    env = {"ANNEAL_HOOK_WORKDIR": str(tmp_path), "ANNEAL_HOOK_TIMEOUT": text}
    with pytest.raises(OptionError, match="ANNEAL_HOOK_TIMEOUT"):
        HookContext.from_env("script", item(), env)


# ---------------------------------------------------------------- files


def test_write_private_creates_0600_by_default(tmp_path):
    """A new private file holds the text and is readable by its owner only."""
    path = write_private(tmp_path / "secret.json", '{"password": "x"}')
    assert path.read_text() == '{"password": "x"}'
    assert mode(path) == 0o600


def test_write_private_replaces_an_open_old_file(tmp_path):
    """An old world-readable file is replaced by a new one with the requested mode."""
    path = tmp_path / "script"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, "new", mode=0o700)
    assert (path.read_text(), mode(path)) == ("new", 0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["script"]


def test_write_private_mode_ignores_umask(tmp_path):
    """The mode is exact even when the umask would take bits away."""
    old = os.umask(0o177)
    try:
        path = write_private(tmp_path / "run", "x", mode=0o700)
    finally:
        os.umask(old)
    assert mode(path) == 0o700


def test_write_private_replaces_a_symlink_not_its_target(tmp_path):
    """A symlink at the path is replaced; the file it pointed to is left untouched."""
    target = tmp_path / "target"
    target.write_text("keep")
    (tmp_path / "link").symlink_to(target)
    write_private(tmp_path / "link", "new")
    assert target.read_text() == "keep"
    assert not (tmp_path / "link").is_symlink()


def test_read_outputs_reads_declared_files(tmp_path):
    """Declared outputs are read from <prefix>.<name>; a missing file is simply not set."""
    prefix = tmp_path / "d1"
    output_path(prefix, "result").write_text("42")
    output_path(prefix, "bytes").write_bytes(b"ok \xff")
    output_path(prefix, "undeclared").write_text("no")
    values, problems = read_outputs(
        prefix, [OutputItem("result"), OutputItem("bytes"), OutputItem("missing")]
    )
    assert values == {"result": "42", "bytes": "ok \ufffd"}
    assert problems == []


def test_read_outputs_refuses_unsafe_names(tmp_path):
    """An unsafe output name is reported as a problem and never opened."""
    (tmp_path / "secret").write_text("do not read")
    prefix = tmp_path / "out" / "d1"
    prefix.parent.mkdir()
    values, problems = read_outputs(prefix, [OutputItem("../secret"), OutputItem("a/b")])
    assert values == {}
    assert len(problems) == 2
    assert "'../secret'" in problems[0]


def test_read_outputs_leaves_out_oversized_files(tmp_path):
    """An output file larger than a signal may carry is reported, not read."""
    prefix = tmp_path / "d1"
    output_path(prefix, "big").write_bytes(b"x" * (wire_caps.MAX_SIGNAL_BYTES + 1))
    values, problems = read_outputs(prefix, [OutputItem("big")])
    assert values == {}
    assert "'big'" in problems[0]


@given(st.text(min_size=1, max_size=40))
def test_output_names_never_leave_the_outputs_dir(name):
    """Any name is either safe and stays in the prefix's dir, or is refused unread."""
    prefix = Path("/nonexistent-anneal-test/outputs/d1")
    values, problems = read_outputs(prefix, [OutputItem(name)])
    assert values == {}
    if wire.safe_output_name(name):
        assert output_path(prefix, name).parent == prefix.parent
        assert problems == []
    else:
        assert len(problems) == 1


def test_clear_outputs_removes_declared_files(tmp_path):
    """Output files of declared outputs are removed; other files stay."""
    prefix = tmp_path / "d1"
    output_path(prefix, "a").write_text("1")
    (tmp_path / "other").write_text("2")
    clear_outputs(prefix, [OutputItem("a"), OutputItem("b"), OutputItem("../other")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]


def test_private_run_gives_a_fresh_0700_dir_removed_even_on_failure(tmp_path):
    """Each run gets its own 0700 dir, outputs left from before cleared; the dir goes even if the run fails."""
    ctx = HookContext("t", tmp_path / "working", tmp_path / "outputs")
    ctx.working_dir.mkdir()
    ctx.outputs_dir.mkdir()
    deployment = item(outputs=(OutputItem("a"),))
    output_path(ctx.outputs_dir / "d1", "a").write_text("stale")
    with pytest.raises(RuntimeError), common.private_run(deployment, ctx) as private:
        assert 0o700 == mode(private.root) and private.root.parent == ctx.working_dir
        assert [] == list(ctx.outputs_dir.iterdir())  # the stale output is gone
        (private.root / "inputs.json").write_text("secret")
        raise RuntimeError("the tool blew up")
    assert [] == list(ctx.working_dir.iterdir())
    with common.private_run(deployment, ctx) as again:
        assert again.root != private.root and again.prefix == ctx.outputs_dir / "d1"
        output_path(again.prefix, "a").write_text("fresh")
    assert ({"a": "fresh"}, []) == common.take_outputs(again.prefix, deployment.outputs)
    assert [] == list(ctx.outputs_dir.iterdir())  # taken, then removed


def test_nothing_to_run_only_for_blank_configs():
    """A blank config runs nothing (success); any text runs."""
    assert common.nothing_to_run(item(), " \n", "playbook")
    assert not common.nothing_to_run(item(), "- hosts: all", "playbook")


@pytest.mark.parametrize(
    ("fields", "named"),
    [({"id": "../d1"}, "'../d1'"), ({"outputs": (OutputItem("x/../../y"),)}, "'x/../../y'")],
)
def test_check_names_refuses_unsafe_ids_and_outputs(fields, named):
    """An unsafe deployment id or output name raises ConfigError naming it."""
    with pytest.raises(ConfigError, match=named):
        check_names(item(**fields))


def test_failure_reports_message_and_code():
    """failure() puts the message in deploy_stderr with the given status."""
    assert failure("no puppet", 127).to_json() == {
        "deploy_stdout": "",
        "deploy_stderr": "no puppet",
        "deploy_status_code": 127,
    }


# ---------------------------------------------------------------- run_tool


def sh(script: str, tmp_path: Path, **kwargs: Any) -> common.ToolResult:
    env = {"PATH": os.environ.get("PATH", os.defpath), **kwargs.pop("env", {})}
    return run_tool(
        ["/bin/sh", "-c", script], env=env, cwd=tmp_path, timeout=kwargs.pop("timeout", 30), **kwargs
    )


def test_run_tool_captures_status_and_streams(tmp_path):
    """The exit status, stdout and stderr of the tool are returned as they were."""
    result = sh("echo out; echo err >&2; exit 3", tmp_path)
    assert result == common.ToolResult(3, "out\n", "err\n", timed_out=False)


def test_run_tool_passes_env_cwd_and_stdin(tmp_path):
    """The tool sees exactly the given env, runs in cwd and reads the given stdin."""
    result = sh('echo "$ONLY" "$HOME" "$(pwd)"; cat', tmp_path, env={"ONLY": "yes"}, stdin=b"from stdin")
    assert result.stdout == f"yes  {tmp_path}\nfrom stdin"


def test_run_tool_replaces_undecodable_bytes(tmp_path):
    """Output that is not UTF-8 is decoded with replacement characters."""
    assert sh(r"printf 'a\377b'", tmp_path).stdout == "a\ufffdb"


def test_run_tool_trims_huge_output(tmp_path):
    """Output beyond the stream cap keeps its head and tail."""
    result = sh("head -c 600000 /dev/zero | tr '\\0' x; echo END", tmp_path)
    assert len(result.stdout.encode()) < wire_caps.MAX_STREAM_BYTES + 100
    assert result.stdout.startswith("xxx")
    assert result.stdout.endswith("END\n")


def test_run_tool_reports_missing_program(tmp_path):
    """A program that does not exist gives status 127 and a message naming it."""
    result = run_tool(["no-such-tool-anneal"], env={"PATH": "/nonexistent"}, cwd=tmp_path, timeout=10)
    assert result.returncode == 127
    assert "no-such-tool-anneal" in result.stderr


def test_run_tool_reports_unexecutable_program(tmp_path):
    """A file without execute permission gives status 127 and a message naming it."""
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o644)
    result = run_tool([str(tool)], env={}, cwd=tmp_path, timeout=10)
    assert result.returncode == 127
    assert str(tool) in result.stderr


def test_run_tool_stops_a_tool_at_its_timeout(tmp_path):
    """A tool still running at its timeout is stopped and reported as 124, timed out."""
    result = sh("echo started; exec sleep 60", tmp_path, timeout=0.5)
    assert (result.returncode, result.timed_out, result.stdout) == (124, True, "started\n")
    assert result.stderr.endswith("timed out after 0.5 s")


# ---------------------------------------------------------------- main


def run_main(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stdin: bytes,
    run: Callable[[DeploymentItem, common.HookContext], Signal],
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = main(run, name="demo")
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.setenv("ANNEAL_HOOK_WORKDIR", str(tmp_path))
    monkeypatch.delenv("ANNEAL_HOOK_TIMEOUT", raising=False)
    return tmp_path


DEPLOYMENT = json.dumps({"id": "d1", "config": "x", "options": {"timeout": 7}}).encode()


def test_main_writes_the_signal_of_run(workdir, monkeypatch, capsys):
    """main() hands run the deployment and context and writes its signal, and only it, on stdout."""
    seen = []

    def run(deployment, ctx):
        seen.append((deployment.id, ctx.name, ctx.timeout))
        return Signal(status_code=4, stdout="o", outputs={"result": "r"})

    code, out, _ = run_main(monkeypatch, capsys, DEPLOYMENT, run)
    assert (code, seen) == (0, [("d1", "demo", 7.0)])
    assert json.loads(out) == {
        "result": "r",
        "deploy_stdout": "o",
        "deploy_stderr": "",
        "deploy_status_code": 4,
    }


def test_main_reports_an_unexpected_exception(workdir, monkeypatch, capsys):
    """An exception inside run becomes a failure signal naming the hook, and exit 0."""

    def run(deployment, ctx):
        raise RuntimeError("boom")

    code, out, _ = run_main(monkeypatch, capsys, DEPLOYMENT, run)
    assert code == 0
    assert wire.decode_signal(json.loads(out)) == Signal(1, "", "hook demo failed: boom")


def test_main_reports_hook_errors_with_their_status(workdir, monkeypatch, capsys):
    """A HookError becomes a failure signal with its own status code and message."""

    def run(deployment, ctx):
        raise ToolNotFoundError("puppet is not installed")

    code, out, _ = run_main(monkeypatch, capsys, DEPLOYMENT, run)
    assert code == 0
    assert wire.decode_signal(json.loads(out)) == Signal(127, "", "puppet is not installed")


def test_main_reports_an_invalid_options_timeout(workdir, monkeypatch, capsys):
    """An invalid options.timeout is a failure naming it, and run is not called."""
    stdin = json.dumps({"id": "d1", "options": {"timeout": "soon"}}).encode()
    code, out, _ = run_main(monkeypatch, capsys, stdin, lambda d, c: pytest.fail("ran"))
    signal = json.loads(out)
    assert (code, signal["deploy_status_code"]) == (0, 1)
    assert "options.timeout" in signal["deploy_stderr"]


@pytest.mark.parametrize(
    "stdin",
    [b"", b"not json", b"[1, 2]", b'{"config": "no id"}', b" " * (wire_caps.MAX_DOCUMENT_BYTES + 1)],
)
def test_main_exits_2_without_a_deployment(workdir, monkeypatch, capsys, stdin):
    """stdin without a readable deployment gives exit 2, a message on stderr, nothing on stdout."""
    code, out, err = run_main(monkeypatch, capsys, stdin, lambda d, c: pytest.fail("ran"))
    assert (code, out) == (2, "")
    assert "hook demo: no deployment to run" in err


def test_capture_keeps_head_and_tail_and_counts_the_cut():
    """A stream over its cap keeps its first and last halves, and says how many bytes were cut."""
    from hooks.process import Capture

    capture = Capture(cap=10)
    for chunk in (b"01234", b"56789", b"abcde", b"fghij"):
        capture.add(chunk)
    assert capture.total == 20
    assert capture.text() == "01234\n[... 10 bytes cut ...]\nfghij"
    small = Capture(cap=10)
    small.add(b"abc")
    assert small.text() == "abc"


def test_tool_not_on_path_is_found_in_the_tools_dir_beside_the_interpreter(tmp_path, monkeypatch):
    """Without a setting or PATH entry, a tool in <sys.prefix>/tools/<venv>/bin (where `make tools` puts it) is used."""
    tool = tmp_path / "tools" / "salt" / "bin" / "salt-call"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    env = {"PATH": str(tmp_path / "empty"), "ANNEAL_SALT_CALL": ""}
    assert str(tool) == common.find_tool("salt-call", setting="ANNEAL_SALT_CALL", install="x", env=env)
    with pytest.raises(ToolNotFoundError) as missing:
        common.find_tool("puppet", setting="ANNEAL_PUPPET", install="apt-get install puppet", env=env)
    assert f"puppet not found on PATH nor in {tmp_path / 'tools'}/*/bin" in str(missing.value)
    assert "install it with: apt-get install puppet" in str(missing.value)


def _live_in_group(pgid: int) -> list[int]:
    """Processes of group *pgid* still alive (a zombie is dead: only its parent can reap it)."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_a_sigterm_while_the_tool_starts_still_stops_its_whole_group(tmp_path, monkeypatch):
    """A SIGTERM that reaches the hook inside Popen, before run_tool knows the tool's process, is held and
    raised once it does: the tool's group is stopped, not left running with nobody to stop it."""
    leader = tmp_path / "leader"
    started: list[int] = []

    class SignalledWhileStarting(subprocess.Popen):  # type: ignore[type-arg]
        """Popen with the race made certain: the hook's SIGTERM is handled before Popen returns."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self.pid)
            wait_until(leader.exists, "the tool to start", 30, interval=0.01)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler runs here, inside the constructor

    monkeypatch.setattr(subprocess, "Popen", SignalledWhileStarting)
    previous = signal.signal(signal.SIGTERM, common._terminate)
    try:
        with pytest.raises(TerminatedError):
            run_tool(
                ["sh", "-c", f"echo $$ > {leader}.tmp; mv {leader}.tmp {leader}; sleep 300"],
                env=dict(os.environ),
                cwd=tmp_path,
                timeout=60,
            )
        left = _live_in_group(started[0])
    finally:
        signal.signal(signal.SIGTERM, previous)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started[0], signal.SIGKILL)  # the old code left them: end them whatever happened
    assert left == []
