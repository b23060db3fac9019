"""The plumbing every hook shares: stdin and stdout, directories, private files, outputs, tools.

A hook is a function ``run(deployment, ctx) -> Signal``; ``main`` reads the deployment, calls
it and writes the signal. stdout carries the signal and nothing else; logs go to stderr.
The exit status is 0 whenever a signal was written (the tool's status travels in
``deploy_status_code``) and 2 when stdin holds no deployment to answer for.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from agent import wire, wire_caps
from agent.wire import DeploymentItem, OutputItem, Signal
from hooks import checkmode
from hooks.errors import ConfigError, HookError, OptionError, TerminatedError, ToolNotFoundError
from hooks.process import (
    STATUS_NOT_EXECUTABLE,
    STATUS_NOT_FOUND,
    STATUS_TIMED_OUT,
    Echo,
    ToolResult,
    hold,
    run_tool,
)

__all__ = [
    "STATUS_NOT_EXECUTABLE",
    "STATUS_NOT_FOUND",
    "STATUS_TIMED_OUT",
    "HookContext",
    "PrivateRun",
    "ToolResult",
    "check_names",
    "clear_outputs",
    "failure",
    "find_tool",
    "main",
    "nothing_to_run",
    "private_run",
    "read_outputs",
    "run_tool",
    "take_outputs",
    "tools_dir",
    "write_private",
]

logger = logging.getLogger(__name__)

#: Exit status of a hook whose stdin holds no readable deployment; nothing is written.
EXIT_BAD_INPUT = 2
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
_SAFE_RULE = "letters, digits, '_', '.' and '-' only, no '..'"


Hook = Callable[[DeploymentItem, "HookContext"], Signal]


def main(run: Hook, *, name: str, check: Hook | None = None) -> int:
    """Read one deployment on stdin, write its signal on stdout; return the exit status.

    Asked to check (hooks/checkmode.py), the hook runs *check* instead, or answers ``unknown``.
    """
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=LOG_FORMAT)
    try:
        deployment = _read_deployment(sys.stdin.buffer)
    except wire.WireError as e:
        print(f"hook {name}: no deployment to run: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        if checkmode.requested(os.environ):
            result = _check(check, deployment, name)
        else:
            result = _answer(run, deployment, name)
    finally:
        signal.signal(signal.SIGTERM, previous)
    sys.stdout.write(json.dumps(result.to_json()))
    sys.stdout.flush()
    return 0


def _read_deployment(stream: IO[bytes]) -> DeploymentItem:
    raw = stream.read(wire_caps.MAX_DOCUMENT_BYTES + 1)
    if len(raw) > wire_caps.MAX_DOCUMENT_BYTES:
        raise wire.WireError(f"stdin: more than {wire_caps.MAX_DOCUMENT_BYTES} bytes")
    return wire.decode_item(wire.loads_capped(raw, wire_caps.MAX_DOCUMENT_BYTES, "stdin"))


def _answer(
    run: Callable[[DeploymentItem, HookContext], Signal], deployment: DeploymentItem, name: str
) -> Signal:
    try:
        echo = Echo(sys.stderr.buffer, _stdout_copy(os.environ))
        ctx = dataclasses.replace(HookContext.from_env(name, deployment), echo=echo)
        return run(deployment, ctx)
    except HookError as e:
        logger.error("deployment %s: %s", deployment.id, e)
        return failure(str(e), e.status_code)
    except Exception as e:
        logger.exception("hook %s failed on deployment %s", name, deployment.id)
        return failure(f"hook {name} failed: {e}")


def _check(check: Hook | None, deployment: DeploymentItem, name: str) -> Signal:
    """The check's verdict; a hook without one, or one that fails, says ``unknown`` and why."""
    if check is None:
        return checkmode.unsupported(name)
    result = _answer(check, deployment, name)
    if result.extra.get("check") in checkmode.STATES:
        return result
    return checkmode.verdict(checkmode.UNKNOWN, reason=f"the check failed: {result.stderr}")


def _stdout_copy(env: Mapping[str, str]) -> IO[bytes] | None:
    """The file the agent asked for a copy of the tool's stdout in (``ANNEAL_HOOK_STDOUT_COPY``)."""
    path = env.get("ANNEAL_HOOK_STDOUT_COPY")
    if not path:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        logger.warning("no copy of the tool's stdout in %s: %s", path, e.strerror)
        return None
    return os.fdopen(fd, "wb", buffering=0)


def _terminate(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM ends the hook at once; the first one stops the tool and reports it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stop = TerminatedError("hook stopped by SIGTERM before its tool finished")
    if not hold(stop):  # held while a tool starts: raised once its process can be stopped
        raise stop


def failure(message: str, code: int = 1) -> Signal:
    """A result that reports *message* in deploy_stderr with status *code*."""
    return Signal(status_code=code, stderr=message)


# ---------------------------------------------------------------- context


@dataclass(frozen=True)
class HookContext:
    """Where a hook writes its files and how long its tool may run (seconds, None: no limit)."""

    name: str
    working_dir: Path
    outputs_dir: Path
    timeout: float | None = None
    #: Where the tool's output is copied as it comes (the hook's stderr; None in tests).
    echo: Echo | None = None

    @classmethod
    def from_env(
        cls, name: str, deployment: DeploymentItem, env: Mapping[str, str] | None = None
    ) -> HookContext:
        """Read the directories and the timeout from *env* (default os.environ); make the dirs."""
        env = os.environ if env is None else env
        timeout = _timeout(deployment, env)
        base = env.get("ANNEAL_HOOK_WORKDIR")
        if base:
            own = _private_dir(Path(base) / name)
            return cls(name, _private_dir(own / "working"), _private_dir(own / "outputs"), timeout)
        key = "HEAT_" + name.upper().replace("-", "_")
        working = env.get(f"{key}_WORKING") or f"/var/lib/heat-config/heat-config-{name}"
        outputs = env.get(f"{key}_OUTPUTS") or f"/var/run/heat-config/heat-config-{name}"
        return cls(name, _private_dir(Path(working)), _private_dir(Path(outputs)), timeout)


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)  # an older directory, or the umask, may have left it open
    return path


def _timeout(deployment: DeploymentItem, env: Mapping[str, str]) -> float | None:
    value = (deployment.options or {}).get("timeout")
    if value is not None:
        return _seconds(value, "options.timeout")
    text = env.get("ANNEAL_HOOK_TIMEOUT")
    if not text:
        return None
    try:
        return _seconds(float(text), "ANNEAL_HOOK_TIMEOUT")
    except ValueError as e:
        raise OptionError(f"ANNEAL_HOOK_TIMEOUT: {text!r} is not a number of seconds") from e


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OptionError(f"{where}: expected a positive number of seconds, got {json_kind(value)}")
    if not math.isfinite(value) or value <= 0:
        raise OptionError(f"{where}: expected a positive number of seconds, got {value}")
    return float(value)


def json_kind(value: Any) -> str:
    """The JSON name of *value*'s type, for messages that must not show the value."""
    if value is None:
        return "null"
    kinds: list[tuple[Any, str]] = [
        (bool, "a boolean"),
        (int | float, "a number"),
        (str, "a string"),
        (Mapping, "a map"),
        (list | tuple, "a list"),
    ]
    return next((text for kind, text in kinds if isinstance(value, kind)), type(value).__name__)


# ---------------------------------------------------------------- files


def write_private(path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    """Write *text* (or bytes, as they are) to *path* created with *mode*, atomically replacing any old file."""
    tmp = path.with_name(f".{os.urandom(8).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode)
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # the umask may have taken bits away
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def check_names(deployment: DeploymentItem) -> None:
    """Raise ConfigError unless the id and every output name can be part of a file name."""
    bad = [] if wire.safe_output_name(deployment.id) else [f"deployment id {deployment.id!r}"]
    bad += [f"output name {o.name!r}" for o in deployment.outputs if not _safe(o)]
    if bad:
        raise ConfigError(f"{', '.join(bad)}: not safe in a file name ({_SAFE_RULE}); not run")


def _safe(output: OutputItem) -> bool:
    return wire.safe_output_name(output.name)


def output_path(prefix: Path, name: str) -> Path:
    """Where a tool writes output *name*: ``<prefix>.<name>`` (Heat's heat_outputs_path)."""
    return prefix.with_name(f"{prefix.name}.{name}")


def read_outputs(prefix: Path, outputs: Sequence[OutputItem]) -> tuple[dict[str, str], list[str]]:
    """Read each declared output from ``<prefix>.<name>``; return (values, problems).

    A missing file means the output was not set. Unsafe names are never used as paths.
    """
    values: dict[str, str] = {}
    problems: list[str] = []
    for output in outputs:
        if not _safe(output):
            problems.append(f"output name {output.name!r}: not safe in a file name; not read")
            continue
        path = output_path(prefix, output.name)
        try:
            with path.open("rb") as f:
                raw = f.read(wire_caps.MAX_SIGNAL_BYTES + 1)
        except FileNotFoundError:
            continue
        except OSError as e:
            problems.append(f"output {output.name!r}: cannot read {path}: {e.strerror}")
            continue
        if len(raw) > wire_caps.MAX_SIGNAL_BYTES:
            problems.append(f"output {output.name!r}: over {wire_caps.MAX_SIGNAL_BYTES} bytes; left out")
            continue
        values[output.name] = raw.decode("utf-8", "replace")
    return values, problems


def clear_outputs(prefix: Path, outputs: Sequence[OutputItem]) -> None:
    """Remove the output files of the declared (safe) outputs, so none outlives its run."""
    for output in outputs:
        if _safe(output):
            output_path(prefix, output.name).unlink(missing_ok=True)


def take_outputs(prefix: Path, outputs: Sequence[OutputItem]) -> tuple[dict[str, str], list[str]]:
    """Read the declared outputs (``read_outputs``), then remove their files."""
    values, problems = read_outputs(prefix, outputs)
    clear_outputs(prefix, outputs)
    return values, problems


@dataclass(frozen=True)
class PrivateRun:
    """One run's private directory and its ``heat_outputs_path`` prefix."""

    root: Path
    prefix: Path


@contextmanager
def private_run(deployment: DeploymentItem, ctx: HookContext, *, check: bool = False) -> Iterator[PrivateRun]:
    """A fresh 0700 directory in the working dir for one run, with no output files left from before.

    It is removed afterwards whatever happens: the files a hook writes there hold the input values.
    A *check* (hooks/checkmode.py) keeps its outputs in it too: the applied run's stay as they are.
    """
    # tempfile and shutil (with bz2 and lzma) cost the agent 1 MiB; the script hook it runs never needs them.
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    root = Path(tempfile.mkdtemp(prefix=f"{deployment.id}.", dir=ctx.working_dir))
    prefix = root / "check-outputs" if check else ctx.outputs_dir / deployment.id
    try:
        clear_outputs(prefix, deployment.outputs)
        yield PrivateRun(root, prefix)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def nothing_to_run(deployment: DeploymentItem, text: str, what: str) -> bool:
    """True (and logged) when the config *text* is empty: the hook reports success and runs nothing."""
    if text.strip():
        return False
    logger.info("deployment %s: empty %s, nothing to run", deployment.id, what)
    return True


# ---------------------------------------------------------------- tools


def tools_dir() -> Path:
    """Where `make tools` puts the tools' virtualenvs: ``tools/`` in this interpreter's environment.

    The hooks run on the agent's interpreter, so that is the project's ``.venv/tools`` in a
    checkout and ``/opt/anneal-agent/tools`` for the packaged agent.
    """
    return Path(sys.prefix) / "tools"


def find_tool(program: str, *, setting: str, install: str, env: Mapping[str, str]) -> str:
    """The path of *program*: ``$<setting>`` when set, else the first on ``PATH``, else in ``tools_dir()``.

    Raises ToolNotFoundError naming the tool, where it was looked for and how to install it.
    """
    configured = env.get(setting)
    if configured:
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        raise ToolNotFoundError(
            f"{program} not found: ${setting} is {configured!r}, which is not an executable file; "
            f"install it with: {install}"
        )
    import shutil  # noqa: PLC0415 - as in private_run

    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        found = next(
            (str(p) for p in sorted(tools_dir().glob(f"*/bin/{program}")) if os.access(p, os.X_OK)), None
        )
    if found is None:
        raise ToolNotFoundError(
            f"{program} not found on PATH nor in {tools_dir()}/*/bin (or set ${setting} to its path); "
            f"install it with: {install}"
        )
    return found


def tool_result_stderr(result: ToolResult, *notes: str) -> str:
    """The tool's stderr followed by the hook's own notes (output problems and the like)."""
    return "\n".join(part for part in (result.stderr, *notes) if part)
