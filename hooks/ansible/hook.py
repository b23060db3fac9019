"""Heat's ``ansible`` group: the config is a playbook, run by ``ansible-runner run``.

Each run gets a private data directory of its own (``hooks.common.private_run``): ``project/playbook.yaml``, ``env/extravars`` (the inputs, ``heat_outputs_path`` and
``heat_config_id``) and ``inventory/hosts`` (localhost with the local connection unless the
``inventory`` option gives one). Options ``tags``, ``skip_tags``, ``modulepath``. Outputs come
from ``$heat_outputs_path.<name>`` files and from ``set_stats`` data; a failed task is named.
Asked to check, it runs the playbook with ``--check --diff`` in a data dir of its own (``check``).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.wire import DeploymentItem, Signal
from hooks import checkmode
from hooks.ansible.events import RunReport, read_report
from hooks.common import (
    HookContext,
    ToolResult,
    check_names,
    find_tool,
    json_kind,
    nothing_to_run,
    private_run,
    run_tool,
    take_outputs,
    tool_result_stderr,
    tools_dir,
    write_private,
)
from hooks.errors import ConfigError, ToolNotFoundError
from hooks.options import get_str, get_words, options_of

logger = logging.getLogger(__name__)


def install() -> str:
    """How to install what this hook runs, where the hook looks for it without settings."""
    venv = tools_dir() / "ansible"
    return f"make tools (in a checkout), or: python3 -m venv {venv} && {venv}/bin/pip install ansible-core ansible-runner"


IDENT = "run"


def run(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """Run the playbook in a fresh private data dir; report status, output, outputs."""
    check_names(deployment)
    playbook = _playbook_text(deployment.config)
    if nothing_to_run(deployment, playbook, "playbook"):
        return Signal()
    with private_run(deployment, ctx) as private:
        result, report = _play(deployment, ctx, playbook, private.root, private.prefix, [])
    outputs, problems = take_outputs(private.prefix, deployment.outputs)
    for output in deployment.outputs:  # set_stats data fill what no file set
        if output.name not in outputs and output.name in report.stats:
            outputs[output.name] = report.stats[output.name]
    status = _status(result.returncode, result.timed_out, report) or (1 if problems else 0)
    stderr = tool_result_stderr(result, *report.failures, *problems)
    stdout = result.stdout.replace("\r\n", "\n")  # the runner reads the play through a pty
    return Signal(status_code=status, stdout=stdout, stderr=stderr, outputs=outputs)


def check(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """``ansible-playbook --check --diff``: drifted when a task would change something (its diff)."""
    check_names(deployment)
    playbook = _playbook_text(deployment.config)
    with private_run(deployment, ctx, check=True) as private:
        result, report = _play(deployment, ctx, playbook, private.root, private.prefix, ["--check", "--diff"])
    stdout = result.stdout.replace("\r\n", "\n")
    if _status(result.returncode, result.timed_out, report):
        reason = tool_result_stderr(result, *report.failures) or "the check run failed"
        return checkmode.verdict(checkmode.UNKNOWN, stdout, reason)
    if report.changed:
        return checkmode.verdict(checkmode.DRIFTED, stdout, f"{report.changed} task(s) would change")
    return checkmode.verdict(checkmode.IN_SYNC, stdout)


def _play(
    deployment: DeploymentItem, ctx: HookContext, playbook: str, root: Path, prefix: Path, extra: list[str]
) -> tuple[ToolResult, RunReport]:
    """Run the playbook with ansible-runner in data dir *root* (``extra``: more ansible-playbook arguments)."""
    options = options_of(deployment)
    runner = find_tool("ansible-runner", setting="ANNEAL_ANSIBLE_RUNNER", install=install(), env=os.environ)
    env = tool_env(runner, os.environ)
    if shutil.which("ansible-playbook", path=env["PATH"]) is None:
        raise ToolNotFoundError(
            f"ansible-playbook not found next to {runner} nor on PATH; install: {install()}"
        )
    write_private_data(root, deployment, playbook, prefix, Path(runner).parent)
    argv = [runner, "run", str(root), "-p", "playbook.yaml", "--ident", IDENT]
    if cmdline := shlex.join([*shlex.split(ansible_cmdline(options)), *extra]):
        argv += ["--cmdline", cmdline]
    if inventory := _inventory_path(options):
        argv += ["--inventory", inventory]
    logger.info("deployment %s: ansible-runner run %s %s", deployment.id, " ".join(extra), root)
    result = run_tool(argv, env=env, cwd=root, timeout=ctx.timeout, echo=ctx.echo)
    return result, read_report(root / "artifacts" / IDENT)


def _status(returncode: int, timed_out: bool, report: RunReport) -> int:
    if timed_out or report.rc is None:
        return returncode
    return report.rc or (1 if report.failures else 0)


def _playbook_text(config: Any) -> str:
    if config is None:
        return ""
    if isinstance(config, str):
        return config
    if isinstance(config, list | dict):
        return json.dumps(config)  # JSON is YAML: a playbook given as data works as is
    raise ConfigError(f"ansible config must be a playbook (a string or a list), got {json_kind(config)}")


def tool_env(runner: str, base: Mapping[str, str]) -> dict[str, str]:
    """*base* with the runner's own bin dir first on PATH, so its ansible-playbook is used."""
    env = dict(base)
    env["PATH"] = os.pathsep.join([str(Path(runner).parent), base.get("PATH", os.defpath)])
    env.setdefault("ANSIBLE_NOCOLOR", "1")
    return env


def write_private_data(
    private: Path, deployment: DeploymentItem, playbook: str, prefix: Path, bindir: Path
) -> None:
    """The runner's input files: playbook, extra vars and (default) inventory, all 0600."""
    for sub in ("project", "env", "inventory"):
        (private / sub).mkdir(mode=0o700)
    write_private(private / "project" / "playbook.yaml", playbook)
    extravars = {
        **deployment.input_values(),
        "heat_outputs_path": str(prefix),
        "heat_config_id": deployment.id,
    }
    write_private(private / "env" / "extravars", json.dumps(extravars))
    inventory = options_of(deployment).get("inventory")
    if isinstance(inventory, str) and inventory.strip() and not os.path.isabs(inventory):
        write_private(private / "inventory" / "hosts", inventory)
    else:
        python = bindir / "python"
        interpreter = f" ansible_python_interpreter={python}" if python.exists() else ""
        write_private(private / "inventory" / "hosts", f"localhost ansible_connection=local{interpreter}\n")


def _inventory_path(options: Mapping[str, Any]) -> str | None:
    """An absolute ``inventory`` option names a file or dir; any other text is the inventory."""
    inventory = get_str(options, "inventory")
    if inventory is None or not os.path.isabs(inventory):
        return None
    if not os.path.exists(inventory):
        raise ConfigError(f"options.inventory: {inventory} does not exist")
    return inventory


def ansible_cmdline(options: Mapping[str, Any]) -> str:
    """ansible-playbook arguments for the options ``tags``, ``skip_tags`` and ``modulepath``."""
    args: list[str] = []
    if tags := get_words(options, "tags"):
        args += ["--tags", ",".join(tags)]
    if skip := get_words(options, "skip_tags"):
        args += ["--skip-tags", ",".join(skip)]
    if modulepath := get_str(options, "modulepath"):
        args += ["--module-path", modulepath]
    return shlex.join(args)
