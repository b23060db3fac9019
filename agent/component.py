"""SoftwareComponent deployments: run the config the component gives for the current action.

Heat stores a component as group ``component`` with ``config: {"configs": [{actions,
config, tool}, ...]}``; heat-config runs the first entry whose ``actions`` hold
``deploy_action``, with that entry's ``config`` as the config and its ``tool`` as the
group. An action no entry lists runs nothing and signals nothing (Heat's rule).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from agent import wire

GROUP = "component"
DEFAULT_ACTIONS = ("CREATE", "UPDATE")


def pick(item: wire.DeploymentItem) -> wire.DeploymentItem | None:
    """The item to run: *item* itself, or a component's entry for the action; None if none."""
    if item.group != GROUP:
        return item
    action = item.input_value("deploy_action")
    configs = item.config.get("configs") if isinstance(item.config, Mapping) else None
    for entry in configs if isinstance(configs, list) else []:
        if isinstance(entry, Mapping) and action in (entry.get("actions") or DEFAULT_ACTIONS):
            return dataclasses.replace(
                item, config=entry.get("config") or "", group=str(entry.get("tool") or "")
            )
    return None
