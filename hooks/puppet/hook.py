"""Heat's ``puppet`` group: ``puppet apply --detailed-exitcodes`` of the config as a manifest.

Inputs become facts (``FACTER_<name>``, option ``enable_facter``, default on) and, with
``enable_hiera``, hiera data for ``lookup()`` through a hiera.yaml of this deployment's own.
Options ``modulepath``, ``tags``, ``debug``, ``verbose``. Exit codes: 0 (nothing changed) and
2 (changes applied) are success; 4 and 6 (failures) and 1 (error) are reported as they are.
Asked to check, it runs ``puppet apply --noop --show_diff`` (``check``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from agent.wire import DeploymentItem, Signal
from hooks import checkmode
from hooks.common import (
    HookContext,
    ToolResult,
    check_names,
    clear_outputs,
    find_tool,
    json_kind,
    run_tool,
    take_outputs,
    tool_result_stderr,
    write_private,
)
from hooks.errors import ConfigError
from hooks.options import get_bool, get_str, get_words, options_of
from hooks.script.hook import env_value

logger = logging.getLogger(__name__)

INSTALL = (
    "make tools (in a checkout), or apt-get install puppet (Debian), or Puppet's own puppet-agent package"
)
#: --detailed-exitcodes: 2 means changes were applied, which is success.
SUCCESS_CODES = frozenset({0, 2})
_FACT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
HIERA_CONFIG = """---
version: 5
defaults:
  datadir: data
  data_hash: json_data
hierarchy:
  - name: "inputs of this deployment"
    path: "heat_config.json"
"""


def run(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """Write the manifest, apply it, and report puppet's status, output and the outputs."""
    prefix = ctx.outputs_dir / deployment.id
    clear_outputs(prefix, deployment.outputs)
    result, notes = _puppet(deployment, ctx, prefix, [])
    outputs, problems = take_outputs(prefix, deployment.outputs)
    status = 0 if result.returncode in SUCCESS_CODES else result.returncode
    status = status or (1 if problems else 0)
    stderr = tool_result_stderr(result, *notes, *problems)
    return Signal(status_code=status, stdout=result.stdout, stderr=stderr, outputs=outputs)


def check(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """``puppet apply --noop --show_diff``: drifted when puppet would change anything (its diff)."""
    # Outputs go to a directory of their own: a check never touches the applied run's outputs.
    prefix = ctx.working_dir / f"{deployment.id}.check" / "out"
    result, notes = _puppet(deployment, ctx, prefix, ["--noop", "--show_diff"])
    if result.returncode not in SUCCESS_CODES:
        return checkmode.verdict(
            checkmode.UNKNOWN, result.stdout, tool_result_stderr(result, *notes) or "puppet failed"
        )
    # --noop exits 0 even with changes pending on this puppet: each pending change says "(noop)".
    pending = [line for line in result.stdout.splitlines() if line.rstrip().endswith("(noop)")]
    if result.returncode == 2 or pending:
        return checkmode.verdict(checkmode.DRIFTED, result.stdout, f"{len(pending)} change(s) pending")
    return checkmode.verdict(checkmode.IN_SYNC, result.stdout)


def _puppet(
    deployment: DeploymentItem, ctx: HookContext, prefix: Path, extra: list[str]
) -> tuple[ToolResult, list[str]]:
    """Run ``puppet apply`` (with *extra* arguments) on the deployment's manifest."""
    check_names(deployment)
    manifest = deployment.config if deployment.config is not None else ""
    if not isinstance(manifest, str):
        raise ConfigError(f"puppet config must be a manifest (a string), got {json_kind(manifest)}")
    options = options_of(deployment)
    puppet = find_tool("puppet", setting="ANNEAL_PUPPET", install=INSTALL, env=os.environ)
    env, notes = puppet_env(deployment, prefix, os.environ, facts=_facts_on(options))
    path = write_private(ctx.working_dir / f"{deployment.id}.pp", manifest)
    argv = [puppet, "apply", "--detailed-exitcodes", "--color", "false", "--logdest", "console", *extra]
    if modulepath := get_str(options, "modulepath"):
        argv += ["--modulepath", modulepath]
    if tags := get_words(options, "tags"):
        argv += ["--tags", ",".join(tags)]
    argv += ["--debug"] if get_bool(options, "debug", False) else []
    argv += ["--verbose"] if get_bool(options, "verbose", False) else []
    hiera = None
    if _hiera_on(options):
        hiera = write_hiera(ctx.working_dir / f"{deployment.id}.hiera", deployment, prefix)
        argv += ["--hiera_config", str(hiera / "hiera.yaml")]
    logger.info("deployment %s: puppet apply %s %s", deployment.id, " ".join(extra), path)
    try:
        result = run_tool(
            [*argv, str(path)], env=env, cwd=ctx.working_dir, timeout=ctx.timeout, echo=ctx.echo
        )
    finally:
        if hiera is not None:
            shutil.rmtree(hiera, ignore_errors=True)  # it holds the input values
    return result, notes


def _facts_on(options: Mapping[str, object]) -> bool:
    # Heat's documentation calls it use_facter; its hook reads enable_facter. Both work here.
    key = "enable_facter" if "enable_facter" in options else "use_facter"
    return get_bool(options, key, True)


def _hiera_on(options: Mapping[str, object]) -> bool:
    key = "enable_hiera" if "enable_hiera" in options else "use_hiera"
    return get_bool(options, key, False)


def puppet_env(
    deployment: DeploymentItem, prefix: Path, base: Mapping[str, str], *, facts: bool
) -> tuple[dict[str, str], list[str]]:
    """*base* plus ``FACTER_<input>`` for each input (when *facts*) and Heat's extra facts."""
    env = dict(base)
    notes: list[str] = []
    for item in deployment.inputs if facts else ():
        value = env_value(item.value)
        if not _FACT_NAME.match(item.name):
            notes.append(f"input {item.name!r} not made a fact: not a valid fact name")
        elif "\0" in value:
            notes.append(f"input {item.name!r} not made a fact: its value contains a NUL character")
        else:
            env[f"FACTER_{item.name}"] = value
    env["FACTER_heat_outputs_path"] = str(prefix)
    env["FACTER_deploy_config_name"] = deployment.name
    for note in notes:
        logger.warning("%s", note)
    return env, notes


def write_hiera(directory: Path, deployment: DeploymentItem, prefix: Path) -> Path:
    """A hiera.yaml of this deployment's own whose data are its inputs (and heat_outputs_path)."""
    (directory / "data").mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    data = {**deployment.input_values(), "heat_outputs_path": str(prefix)}
    write_private(directory / "hiera.yaml", HIERA_CONFIG)
    write_private(directory / "data" / "heat_config.json", json.dumps(data))
    return directory
