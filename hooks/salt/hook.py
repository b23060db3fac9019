"""Heat's ``salt`` group: the config is a state file, applied masterless by ``salt-call --local``.

Each run gets a private directory of its own (``hooks.common.private_run``) with a minion config, a file root holding the config as ``deploy.sls`` and a pillar root. Inputs are
pillar (``pillar['name']``) and, as Heat's hook makes them, minion options
(``salt['config.get']('name')``). The state results are summarised in deploy_stdout. A
non-zero retcode whose states all succeeded counts as success (Heat's rule, bug 1483336).
Asked to check, it runs ``state.sls deploy test=True`` in a salt root of its own (``check``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.wire import DeploymentItem, Signal
from hooks import checkmode
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
from hooks.errors import ConfigError
from hooks.salt.results import summarise

logger = logging.getLogger(__name__)


def install() -> str:
    """How to install what this hook runs, where the hook looks for it without settings."""
    venv = tools_dir() / "salt"
    return f"make tools (in a checkout), or: python3 -m venv {venv} && {venv}/bin/pip install 'salt==3008.3'"


STATE = "deploy"


def run(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """Apply the state in a fresh salt root; report the summary, status and outputs."""
    check_names(deployment)
    state = _state_text(deployment.config)
    if nothing_to_run(deployment, state, "state"):
        return Signal()
    with private_run(deployment, ctx) as private:
        result, notes = _salt(deployment, ctx, state, private.root, private.prefix, [])
    outputs, problems = take_outputs(private.prefix, deployment.outputs)
    summary = summarise(result.stdout)
    status = result.returncode
    if status and not result.timed_out and summary.all_succeeded:
        status = 0  # Heat's rule: salt may exit non-zero although every state succeeded
    status = status or (1 if problems or summary.errors else 0)
    stderr = tool_result_stderr(result, *summary.errors, *notes, *problems)
    return Signal(status_code=status, stdout=summary.text, stderr=stderr, outputs=outputs)


def check(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """``state.sls ... test=True``: drifted when a state would change something (its changes)."""
    check_names(deployment)
    state = _state_text(deployment.config)
    with private_run(deployment, ctx, check=True) as private:
        result, notes = _salt(deployment, ctx, state, private.root, private.prefix, ["test=True"])
    summary = summarise(result.stdout)
    if summary.errors or result.timed_out:
        reason = tool_result_stderr(result, *summary.errors, *notes) or "the check run failed"
        return checkmode.verdict(checkmode.UNKNOWN, summary.text, reason)
    if summary.pending:
        return checkmode.verdict(checkmode.DRIFTED, summary.text, f"{summary.pending} state(s) would change")
    return checkmode.verdict(checkmode.IN_SYNC, summary.text)


def _salt(
    deployment: DeploymentItem, ctx: HookContext, state: str, root: Path, prefix: Path, extra: list[str]
) -> tuple[ToolResult, list[str]]:
    """``salt-call --local state.sls`` of *state* in salt root *root* (``extra``: more arguments)."""
    salt_call = find_tool("salt-call", setting="ANNEAL_SALT_CALL", install=install(), env=os.environ)
    notes = write_salt_root(root, deployment, state, prefix)
    argv = [
        salt_call,
        "--local",
        f"--config-dir={root / 'conf'}",
        "--retcode-passthrough",
        "--out=json",
        "--no-color",
        "--log-level=warning",
        "state.sls",
        STATE,
        *extra,
    ]
    logger.info("deployment %s: salt-call --local state.sls %s in %s", deployment.id, " ".join(extra), root)
    return run_tool(argv, env=os.environ, cwd=root, timeout=ctx.timeout, echo=ctx.echo), notes


def _state_text(config: Any) -> str:
    if config is None:
        return ""
    if isinstance(config, str):
        return config
    if isinstance(config, dict):
        return "#!json\n" + json.dumps(config)  # rendered as data, never as a template
    raise ConfigError(f"salt config must be a state (a string or a map), got {json_kind(config)}")


def minion_config(root: Path) -> dict[str, Any]:
    """A masterless minion whose every directory is under *root*."""
    return {
        "file_client": "local",
        "id": "anneal-local",
        "root_dir": str(root),
        "cachedir": str(root / "cache"),
        "pki_dir": str(root / "pki"),
        "sock_dir": str(root / "run"),
        "pidfile": str(root / "run" / "minion.pid"),
        "log_file": str(root / "log" / "minion"),
        "file_roots": {"base": [str(root / "srv")]},
        "pillar_roots": {"base": [str(root / "pillar")]},
    }


def write_salt_root(root: Path, deployment: DeploymentItem, state: str, prefix: Path) -> list[str]:
    """Config, state and pillar files (0600); notes name inputs not made minion options."""
    for sub in ("conf", "srv", "pillar", "cache", "pki", "run", "log"):
        (root / sub).mkdir(mode=0o700)
    values = {**deployment.input_values(), "heat_outputs_path": str(prefix)}
    config = minion_config(root)
    opts, notes = _as_options(values, config)
    write_private(root / "conf" / "minion", json.dumps({**opts, **config}))  # JSON is YAML
    write_private(root / "srv" / f"{STATE}.sls", state)
    write_private(root / "pillar" / "top.sls", json.dumps({"base": {"*": ["heat"]}}))
    write_private(root / "pillar" / "heat.sls", "#!json\n" + json.dumps(values))
    return notes


def _as_options(values: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    taken = [name for name in values if name in config]
    notes = [f"input {name!r} not made a minion option: the hook sets that option" for name in taken]
    for note in notes:
        logger.warning("%s", note)
    return {k: v for k, v in values.items() if k not in config}, notes
