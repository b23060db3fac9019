"""Heat's ``chef`` group: ``chef-client -z --config client.rb -j node.json`` in local mode.

The config is the run list (a list, or a JSON list in a string). The inputs are the node's
attributes, except Heat's ``deploy_*`` inputs (the signal credential among them); an input
``environment`` names the Chef environment. Options ``kitchen_path`` (cookbooks, roles and
environments below it) and ``cookbook_path``. The environment has ``heat_outputs_path`` and
``deploy_action`` (Heat leaves the action out of the node's attributes). ``cinc-client`` is used when it is the client
installed. Each run's client.rb and node JSON are in a directory of its own, removed after.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.wire import DeploymentItem, Signal
from hooks.common import (
    HookContext,
    check_names,
    json_kind,
    private_run,
    run_tool,
    take_outputs,
    tool_result_stderr,
    write_private,
)
from hooks.errors import ConfigError, OptionError, ToolNotFoundError
from hooks.options import get_str, options_of

logger = logging.getLogger(__name__)

SETTING = "ANNEAL_CHEF_CLIENT"
CLIENTS = ("chef-client", "cinc-client")
INSTALL = "Chef Infra Client or Cinc Client from their omnibus packages (not in Debian)"


def run(deployment: DeploymentItem, ctx: HookContext) -> Signal:
    """Write client.rb and the node JSON, run the client in local mode, report its result."""
    check_names(deployment)
    run_list = parse_run_list(deployment.config)
    options = options_of(deployment)
    if options.get("kitchen"):
        raise OptionError(
            "options.kitchen: cloning a kitchen from git is not done by this hook; "
            "put the kitchen on the server and set options.kitchen_path"
        )
    client = find_client(os.environ)
    kitchen = Path(get_str(options, "kitchen_path") or ctx.working_dir / "kitchen")
    cookbooks = get_str(options, "cookbook_path") or str(kitchen / "cookbooks")
    with private_run(deployment, ctx) as private:  # the node JSON holds the input values
        own = private.root
        client_rb = write_private(own / "client.rb", client_config(own, kitchen, cookbooks, deployment))
        node = write_private(own / "node.json", json.dumps(node_json(deployment, run_list), indent=2))
        action = str(deployment.input_value("deploy_action") or "")
        env = {**os.environ, "heat_outputs_path": str(private.prefix), "deploy_action": action}
        logger.info("deployment %s: %s -z with run list of %d entries", deployment.id, client, len(run_list))
        argv = [client, "-z", "--config", str(client_rb), "-j", str(node)]
        result = run_tool(argv, env=env, cwd=own, timeout=ctx.timeout, echo=ctx.echo)
    outputs, problems = take_outputs(private.prefix, deployment.outputs)
    status = result.returncode or (1 if problems else 0)
    stderr = tool_result_stderr(result, *problems)
    return Signal(status_code=status, stdout=result.stdout, stderr=stderr, outputs=outputs)


def find_client(env: Mapping[str, str]) -> str:
    """``$ANNEAL_CHEF_CLIENT``, else chef-client, else cinc-client on PATH."""
    configured = env.get(SETTING)
    if configured:
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        raise ToolNotFoundError(
            f"chef-client not found: ${SETTING} is {configured!r}, which is not an executable file; "
            f"install {INSTALL}"
        )
    for name in CLIENTS:
        if found := shutil.which(name, path=env.get("PATH", os.defpath)):
            return found
    raise ToolNotFoundError(
        f"chef-client not found: neither chef-client nor cinc-client is on PATH "
        f"(or set ${SETTING} to its path); install {INSTALL}"
    )


def parse_run_list(config: Any) -> list[str]:
    """The run list: a list of strings, or a string holding a JSON list of them."""
    value = config
    if isinstance(config, str):
        try:
            value = json.loads(config) if config.strip() else []
        except ValueError as e:
            raise ConfigError(f"chef config must be a run list (a JSON list of strings): {e}") from e
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise ConfigError(f"chef config must be a run list (a list of strings), got {json_kind(value)}")
    return value


def node_json(deployment: DeploymentItem, run_list: list[str]) -> dict[str, Any]:
    """The node's attributes: every input but Heat's own ``deploy_*`` ones, and the run list."""
    attributes = {
        item.name: item.value
        for item in deployment.inputs
        if not item.name.startswith("deploy_") and item.name != "environment"
    }
    return {**attributes, "run_list": run_list}


def client_config(own: Path, kitchen: Path, cookbooks: str, deployment: DeploymentItem) -> str:
    """client.rb for local mode (chef-zero) with this run's own cache and node dirs."""
    lines: dict[str, str | bool | list[str]] = {
        "local_mode": True,
        "cookbook_path": [cookbooks],
        "role_path": str(kitchen / "roles"),
        "environment_path": str(kitchen / "environments"),
        "node_path": str(own / "nodes"),
        "file_cache_path": str(own / "cache"),
        "log_location": "STDOUT",
    }
    environment = deployment.input_value("environment")
    if isinstance(environment, str) and environment:
        lines["environment"] = environment
    body = "".join(f"{key} {ruby_literal(value)}\n" for key, value in lines.items())
    return body + "chef_zero.enabled true\n"


def ruby_literal(value: str | bool | list[str]) -> str:
    """*value* as Ruby source: single-quoted strings (no interpolation), arrays, booleans."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(ruby_literal(v) for v in value) + "]"
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
