"""The tests' zygote (tests/support/zygote.py) gives a forked `anneal` what an exec of the command gives.

Each test here runs the same command both ways, exec'd and forked, and compares what a test
can see of the process: its output in the log file, its exit status as ``Popen.returncode``,
its session, its environment as its own code reads it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from tests.support.controlplane import start_control_plane, stop_control_plane
from tests.support.processes import BIN, free_port
from tests.support.zygote import ZYGOTE, Forked, Process


def _both(tmp: Path, *args: str, env: dict[str, str] | None = None) -> list[tuple[Process, Path]]:
    """`anneal *args*` exec'd, then forked, each with its output in a log file of its own."""
    started: list[tuple[Process, Path]] = []
    full = {**os.environ, **(env or {})}
    for how in ("exec", "fork"):
        log = tmp / f"{how}.log"
        argv = [str(BIN / "anneal"), *args]
        if how == "fork":
            started.append((ZYGOTE.spawn(argv, log, full), log))
            continue
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=full
            )
        started.append((proc, log))
    return started


def test_output_and_exit_status_are_the_commands(tmp_path: Path) -> None:
    """`anneal --version` (0) and an unknown command (argparse's 2) print and exit alike."""
    for args, code in ((("--version",), 0), (("no-such-command",), 2)):
        runs = _both(tmp_path, *args)
        assert [code, code] == [p.wait(60) for p, _ in runs], args
        (_, exec_log), (forked, fork_log) = runs
        assert isinstance(forked, Forked)
        assert exec_log.read_text() == fork_log.read_text(), args
        assert exec_log.read_text().strip(), f"{args}: nothing printed"


def test_a_forked_control_plane_is_a_session_of_its_own_and_a_signal_shows_in_its_status(
    tmp_path: Path,
) -> None:
    """Forked from the zygote, not from this worker; a session leader; SIGKILL reads as -9, as with Popen."""
    cp = start_control_plane(tmp_path)
    try:
        assert isinstance(cp.proc, Forked)
        assert os.getsid(cp.proc.pid) == cp.proc.pid
        assert "anneal" == Path(f"/proc/{cp.proc.pid}/comm").read_text().strip()
        assert os.getppid() != _parent(cp.proc.pid)  # the zygote's child
        assert cp.proc.poll() is None
        cp.proc.send_signal(signal.SIGKILL)
        assert -signal.SIGKILL == cp.proc.wait(30)
    finally:
        stop_control_plane(cp)


def test_the_environment_given_is_the_one_the_command_reads(tmp_path: Path) -> None:
    """A setting given only in the start's environment (the CLI's ANNEAL_URL, a port nothing listens
    on) is what the forked command reads, as the exec'd one does; this worker's stays as it was."""
    url = f"http://127.0.0.1:{free_port()}"
    env = {"ANNEAL_URL": url, "ANNEAL_TOKEN": "t", "ANNEAL_CONFIG": str(tmp_path / "none.json")}
    runs = _both(tmp_path, "stack", "list", env=env)
    codes = [p.wait(60) for p, _ in runs]
    assert codes[0] == codes[1] != 0, codes
    texts = [log.read_text() for _, log in runs]
    assert texts[0] == texts[1], texts
    assert url.split("//")[1] in texts[1], texts[1]
    assert "ANNEAL_URL" not in os.environ


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_a_cli_call_forked_answers_as_the_command_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ControlPlane.cli`` forks in a test: output, errors and exit status as the exec'd command's."""
    forks: list[Sequence[str]] = []
    run = ZYGOTE.run

    def counted(
        argv: Sequence[str], env: Mapping[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        forks.append(argv)
        return run(argv, env, timeout)

    monkeypatch.setattr(ZYGOTE, "run", counted)
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    try:
        assert 201 == cp.api("POST", "/v1/servers", {"name": "zygote-srv"}).status
        for args in (("server", "list", "-f", "json"), ("stack", "show", "no-such-stack"), ("no-such",)):
            forked = cp.cli(*args)
            execd = subprocess.run(
                [str(BIN / "anneal"), *args],
                env=cp.env(),
                text=True,
                capture_output=True,
                timeout=60,
                check=False,
            )
            assert (execd.returncode, execd.stdout, execd.stderr) == (
                forked.returncode,
                forked.stdout,
                forked.stderr,
            ), args
        assert "zygote-srv" in cp.cli("server", "list").stdout
        assert 0 != cp.cli("stack", "show", "no-such-stack").returncode
        assert 5 == len(forks), forks
    finally:
        stop_control_plane(cp)
