"""Heat's ``docker-compose`` group: the config is a compose file, brought up (or down) as a project.

The config (a compose map from a StructuredConfig, or its YAML text) is written to
``<working>/<project>/docker-compose.yml``, the project named after the deployment; the
input ``env_files`` (Heat's: ``[{file_name, content}]``) is written beside it. The tool is
``docker compose`` when Docker's plugin answers, else ``podman-compose``, else
``docker-compose`` (``$ANNEAL_COMPOSE`` names one outright). CREATE, UPDATE and RESUME run
``up -d``; DELETE and SUSPEND run ``down``. Status: the tool's exit code; podman-compose
exits 0 when a podman command it ran failed, so its ``exit code: N`` lines are read too.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.wire import DeploymentItem, Signal
from hooks.common import HookContext, json_kind, nothing_to_run, run_tool, tool_result_stderr, write_private
from hooks.errors import ConfigError, ToolNotFoundError
from hooks.process import ToolResult

logger = logging.getLogger(__name__)

INSTALL = "apt-get install podman-compose (Debian), or Docker with its compose plugin"
STOPS = frozenset({"DELETE", "SUSPEND"})
_PROJECT = re.compile(r"[^a-z0-9_-]")
_FAILED_STEP = re.compile(r"^exit code: ([1-9][0-9]*)$", re.MULTILINE)
#: Seconds `docker compose version` may take to say whether Docker's plugin is there.
PROBE_TIMEOUT = 30.0


def run(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """Write the compose file and its env files, bring the project up (or down), report the tool's result."""
    text = compose_text(deployment.config)
    action = str(deployment.input_value("deploy_action") or "CREATE")
    if nothing_to_run(deployment, text, "compose file") and action not in STOPS:
        return Signal()
    project = project_name(deployment)
    directory = ctx.working_dir / project
    directory.mkdir(mode=0o700, exist_ok=True)
    if text.strip():
        write_private(directory / "docker-compose.yml", text)
    write_env_files(directory, deployment.input_value("env_files"))
    tool = compose_command(os.environ, directory)
    verb = ["down"] if action in STOPS else ["up", "-d", "--no-build"]
    argv = [*tool, "-p", project, "-f", "docker-compose.yml", *verb]
    logger.info("deployment %s: %s in %s", deployment.id, " ".join(argv), directory)
    result = run_tool(argv, env=os.environ, cwd=directory, timeout=ctx.timeout, echo=ctx.echo)
    return signal_of(result, tool)


def compose_text(config: Any) -> str:
    """The compose file: text as given, a map as JSON (which every YAML reader takes)."""
    if config is None:
        return ""
    if isinstance(config, str):
        return config
    if isinstance(config, Mapping):
        return json.dumps(config, indent=2) + "\n"
    raise ConfigError(
        f"docker-compose config must be a compose map or its YAML text, got {json_kind(config)}"
    )


def project_name(deployment: DeploymentItem) -> str:
    """A compose project name from the deployment's name (lower-case letters, digits, '-', '_')."""
    name = _PROJECT.sub("-", deployment.name.lower()).strip("-_")
    return name or f"heat-{deployment.id[:8]}"


def write_env_files(directory: Path, given: Any) -> None:
    """Heat's ``env_files`` input: each ``{file_name, content}`` written in the project directory."""
    if given is None:
        return
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            raise ConfigError("env_files must be a list of {file_name, content}, got text") from None
    if not isinstance(given, list):
        raise ConfigError(f"env_files must be a list of {{file_name, content}}, got {json_kind(given)}")
    for i, entry in enumerate(given):
        name = entry.get("file_name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise ConfigError(f"env_files[{i}].file_name must be a plain file name, got {name!r}")
        content = entry.get("content", "")
        write_private(directory / name, content if isinstance(content, str) else json.dumps(content))


def compose_command(env: Mapping[str, str], cwd: Path) -> list[str]:
    """``docker compose``, ``podman-compose`` or ``docker-compose``: the first this server has."""
    path = env.get("PATH", os.defpath)
    configured = env.get("ANNEAL_COMPOSE")
    if configured:
        found = shutil.which(configured, path=path)
        if found is None:
            raise ToolNotFoundError(f"$ANNEAL_COMPOSE is {configured!r}, which is not an executable")
        return [found]
    docker = shutil.which("docker", path=path)
    if docker is not None:
        probe = run_tool([docker, "compose", "version"], env=env, cwd=cwd, timeout=PROBE_TIMEOUT)
        if probe.returncode == 0:
            return [docker, "compose"]
    for program in ("podman-compose", "docker-compose"):
        found = shutil.which(program, path=path)
        if found is not None:
            return [found]
    raise ToolNotFoundError(
        "no compose tool found: neither `docker compose` (Docker's plugin), podman-compose nor "
        f"docker-compose is on PATH ({path}); install one with: {INSTALL}"
    )


def signal_of(result: ToolResult, tool: list[str]) -> Signal:
    """The tool's status; a podman-compose that hid a failed podman step reports that step's code."""
    status = result.returncode
    note = ""
    if status == 0 and Path(tool[0]).name == "podman-compose":
        failed = _FAILED_STEP.findall(result.stdout + "\n" + result.stderr)
        if failed:
            status = int(failed[0])
            note = f"podman-compose exited 0, but a podman command it ran exited {status}"
    return Signal(status_code=status, stdout=result.stdout, stderr=tool_result_stderr(result, note))
