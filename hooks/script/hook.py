"""Heat's ``script`` group: the config is a program, each input an environment variable.

The config is written to ``<working_dir>/<id>`` (0700) and run there, by the interpreter
of its ``#!`` line or by /bin/sh; a binary config (``get_file`` of a binary file) is
written byte for byte, and a binary input is a file whose path is its variable; a config
that came sealed (``ANNEAL_SEALED`` names ``config``) is removed once it ran. The program
sets outputs by writing the files
``$heat_outputs_path.<output name>``; its exit status is ``deploy_status_code``. A check
runs the config's ``options.check`` program the same way: exit 0 in sync, 1 drifted.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import wire_files
from agent.wire import DeploymentItem, InputItem, Signal
from hooks import checkmode
from hooks.common import (
    HookContext,
    ToolResult,
    check_names,
    clear_outputs,
    json_kind,
    nothing_to_run,
    run_tool,
    take_outputs,
    write_private,
)
from hooks.errors import ConfigError, ToolNotFoundError

logger = logging.getLogger(__name__)

SHELL = "/bin/sh"
#: The option that holds a config's check: a program run like the config, that changes nothing.
CHECK_OPTION = "check"
NO_CHECK = "the config has no check program (options.check)"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Plan:
    """A script written and ready to run: its command, its environment, where its outputs go."""

    argv: list[str]
    env: dict[str, str]
    prefix: Path
    notes: list[str]
    #: The config came sealed (``ANNEAL_SEALED``): ``forget`` removes the script once it ran.
    sealed: bool = False


def run(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """Write the config as a script, run it, and report its status, output and outputs."""
    plan = prepare(deployment, ctx, os.environ)
    if plan is None:
        return Signal()
    try:
        result = run_tool(plan.argv, env=plan.env, cwd=ctx.working_dir, timeout=ctx.timeout, echo=ctx.echo)
    finally:
        forget(plan)
    return finish(deployment, plan, result)


def prepare(deployment: DeploymentItem, ctx: HookContext, base: Mapping[str, str]) -> Plan | None:
    """Check the names, write the script and clear old outputs; None when there is nothing to run.

    The agent runs the plan itself (agent/inline.py); ``run`` runs it here, in the hook's process.
    """
    check_names(deployment)
    program = wire_files.opened(deployment.config)  # get_file of a binary file: its very bytes
    script = _script_text(deployment.config) if program is None else program.decode("latin-1")
    if nothing_to_run(deployment, script, "config"):
        return None
    prefix = ctx.outputs_dir / deployment.id
    env, notes = script_env(deployment.inputs, prefix, base, ctx.working_dir / f"{deployment.id}.files")
    command = interpreter(script, cwd=ctx.working_dir, path=env.get("PATH", os.defpath))
    path = write_private(ctx.working_dir / deployment.id, script if program is None else program, mode=0o700)
    clear_outputs(prefix, deployment.outputs)
    logger.info("deployment %s: running %s with %s", deployment.id, path, command[0])
    sealed = "config" in base.get("ANNEAL_SEALED", "").split(",")
    return Plan([*command, str(path)], env, prefix, notes, sealed)


def forget(plan: Plan) -> None:
    """Remove the script once it ran when its config came sealed: a secret config leaves no copy."""
    if plan.sealed:
        Path(plan.argv[-1]).unlink(missing_ok=True)


def finish(deployment: DeploymentItem, plan: Plan, result: ToolResult) -> Signal:
    """The signal of a finished run: the script's status and output, and the outputs it wrote."""
    outputs, problems = take_outputs(plan.prefix, deployment.outputs)
    stderr = "\n".join(part for part in (*plan.notes, result.stderr, *problems) if part)
    status = result.returncode or (1 if problems else 0)
    return Signal(status_code=status, stdout=result.stdout, stderr=stderr, outputs=outputs)


def check(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """Run the config's check program (``options.check``); without one the answer is ``unknown``."""
    probe = check_item(deployment)
    if probe is None:
        return checkmode.unsupported("script", NO_CHECK)
    return check_verdict(run(probe, ctx))


def check_item(deployment: DeploymentItem) -> DeploymentItem | None:
    """The deployment with its ``options.check`` program as config (under its own id, no outputs), or None."""
    probe = (deployment.options or {}).get(CHECK_OPTION)
    if not isinstance(probe, str) or not probe.strip():
        return None
    return dataclasses.replace(deployment, id=f"{deployment.id}.check", config=probe, outputs=())


def check_verdict(result: Signal) -> Signal:
    """Exit 0: in sync; 1: drifted (stdout is the diff); any other status: unknown (stderr says why)."""
    if result.status_code == 0:
        return checkmode.verdict(checkmode.IN_SYNC, result.stdout)
    if result.status_code == 1:
        return checkmode.verdict(checkmode.DRIFTED, result.stdout, result.stderr or "the check exited 1")
    why = f"the check exited {result.status_code}: {result.stderr}"
    return checkmode.verdict(checkmode.UNKNOWN, result.stdout, why)


def _script_text(config: Any) -> str:
    if config is None:
        return ""
    if not isinstance(config, str):
        raise ConfigError(f"script config must be a string, got {json_kind(config)}")
    return config


def env_value(value: Any) -> str:
    """An input value as an environment variable: strings as is, null empty, others JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value)


def script_env(
    inputs: Sequence[InputItem], prefix: Path, base: Mapping[str, str], files: Path | None = None
) -> tuple[dict[str, str], list[str]]:
    """*base* plus every input and ``heat_outputs_path``; notes name the inputs left out.

    A binary input (get_file of a binary file) is written byte for byte to a 0600 file
    under *files*; its variable holds that file's path.
    """
    env = dict(base)
    notes: list[str] = []
    for item in inputs:
        data = wire_files.opened(item.value)
        if data is not None and files is not None and _ENV_NAME.match(item.name):
            files.mkdir(mode=0o700, exist_ok=True)
            env[item.name] = str(write_private(files / item.name, data))
            continue
        value = env_value(item.value)
        if not _ENV_NAME.match(item.name):
            notes.append(f"input {item.name!r} skipped: not a valid environment variable name")
        elif "\0" in value:
            notes.append(f"input {item.name!r} skipped: its value contains a NUL character")
        else:
            env[item.name] = value
    for note in notes:
        logger.warning("%s", note)
    env["heat_outputs_path"] = str(prefix)
    # Python buffers a pipe's output: unbuffered, what a script printed survives a crash.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env, notes


def interpreter(script: str, *, cwd: Path, path: str) -> list[str]:
    """The command that runs *script* (before its file name): its ``#!`` line, else /bin/sh.

    Raises ToolNotFoundError when the interpreter, or the program ``env`` should
    find on *path*, is missing.
    """
    first = script.split("\n", 1)[0]
    if not first.startswith("#!"):
        return [SHELL]
    spec = first[2:].strip()
    # Like the kernel: the interpreter, then the rest of the line as one argument.
    program, *rest = re.split(r"[ \t]", spec, maxsplit=1)
    arg = rest[0].strip() if rest else ""
    command = [program, arg] if arg else [program]
    if not (_executable(cwd / program) and _env_finds(command, path)):
        raise ToolNotFoundError(f"script interpreter '{spec}' not found")
    return command


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _env_finds(command: Sequence[str], path: str) -> bool:
    """For ``#!/usr/bin/env NAME``: True when NAME is on *path* (other forms are not checked)."""
    if Path(command[0]).name != "env" or len(command) < 2:
        return True
    words = command[1].split()
    if words[0] == "-S":  # env -S splits the rest of the line into arguments
        words = words[1:]
    if not words or words[0].startswith("-") or "=" in words[0]:
        return True
    import shutil  # noqa: PLC0415 - the agent runs this hook: shutil loads bz2 and lzma for one call

    return shutil.which(words[0], path=path) is not None
