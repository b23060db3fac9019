"""The node allowlist: the hook groups, and optionally the exact configs, this server will run.

A signed document proves the control plane sent it, not that this server should do it: a
stolen signing key or a mistaken template could otherwise make any server run any hook.
``allowed_groups`` and ``allowed_configs`` in ``agent.json`` (or ``--allow-group`` and
``--allow-config`` on ``run``/``once``) are the server's own limit. Anything outside them is
never started: it is recorded finished with status 126 and the reason, and signalled FAILED.
"""

from __future__ import annotations

from typing import Any

from agent import crypto, wire
from agent.config import AgentConfig

REFUSED_CODE = 126  # the shell's "found but not allowed to execute"


def config_digest(config: Any) -> str:
    """``sha256:<hex>`` of a config: its UTF-8 text (``sha256sum`` of a script file), else its canonical JSON."""
    data = config.encode() if isinstance(config, str) else wire.canonical_json(config)
    return "sha256:" + crypto.sha256(data).hex()  # not hashlib: it would load a second binding of libcrypto


def refusal(config: AgentConfig, chosen: wire.DeploymentItem) -> wire.Signal | None:
    """The FAILED result for *chosen* (the item a hook would run) when the allowlist refuses it."""
    groups = config.allowed_groups
    if groups is not None and chosen.group not in groups:
        why = f"hook group {chosen.group!r} is not in this server's allowed_groups {sorted(groups)}"
    elif config.allowed_configs is not None and (digest := config_digest(chosen.config)) not in set(
        config.allowed_configs
    ):
        why = f"config {digest} of group {chosen.group!r} is not in this server's allowed_configs"
    else:
        return None
    reason = f"refused by the node allowlist: {why}; nothing was run"
    return wire.Signal(status_code=REFUSED_CODE, stderr=reason, extra={"refused": reason})
