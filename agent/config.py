"""The agent's settings, kept in ``agent.json`` in its state dir (mode 0600)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.errors import ConfigError
from agent.fsutil import private_dir, write_atomic

CONFIG_FILE = "agent.json"
#: Hook directories Heat's agents use; executables there run for their group name.
HEAT_HOOK_DIRS = ("/var/lib/heat-config/hooks", "/usr/libexec/heat-config/hooks")


@dataclass(frozen=True)
class AgentConfig:
    url: str
    server_id: str
    name: str
    credential: str
    document_url: str
    heartbeat_url: str
    control_public_key: str = ""
    #: How documents are verified: "signed" (default) or "heat-compatible" (Heat's unsigned ones).
    document_policy: str = "signed"
    hook_dirs: tuple[str, ...] = HEAT_HOOK_DIRS
    #: Seconds a long-poll may wait on the control plane (its maximum, ``long_poll_max``): an idle
    #: agent makes one poll a minute (its heartbeat, folded in); a change still arrives as it is published.
    poll_wait: float = 60.0
    #: Seconds between heartbeats (x0.9-1.1), well inside the 90 s heartbeat lease; over HTTP one is
    #: sent only when it says something new, as the polls mark the agent alive (client.Heartbeat).
    heartbeat_interval: float = 60.0
    #: Upper bound of the back-off after errors (seconds).
    backoff_max: float = 60.0
    #: Per-hook timeout when the document does not set one (seconds).
    hook_timeout: float = 3600.0
    #: LOCAL transport: where the media with ``document.json`` is mounted, and the signal outbox.
    media_dir: str = ""
    signal_dir: str = ""
    #: Added to every hook's environment: tool paths such as ANNEAL_SALT_CALL (docs/hooks.md).
    hook_env: dict[str, str] = field(default_factory=dict)
    #: The node allowlist (agent/allowlist.py): hook groups, and ``sha256:<hex>`` config digests,
    #: this server runs; None allows any.
    allowed_groups: tuple[str, ...] | None = None
    allowed_configs: tuple[str, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, **changes: Any) -> AgentConfig:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def config_path(state_dir: Path) -> Path:
    return state_dir / CONFIG_FILE


def load(state_dir: Path) -> AgentConfig | None:
    """The saved config, or None when the agent has not enrolled yet."""
    path = config_path(state_dir)
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON: {e}") from e
    try:
        raw["hook_dirs"] = tuple(raw.get("hook_dirs", HEAT_HOOK_DIRS))
        for key in ("allowed_groups", "allowed_configs"):
            if raw.get(key) is not None:
                raw[key] = _names(raw[key], f"{path}: {key}")
        return AgentConfig(**raw)
    except TypeError as e:
        raise ConfigError(f"{path}: {e}") from e


def save(state_dir: Path, config: AgentConfig) -> None:
    private_dir(state_dir)
    data = asdict(config)
    data["hook_dirs"] = list(config.hook_dirs)
    for key in ("allowed_groups", "allowed_configs"):
        if data[key] is not None:
            data[key] = list(data[key])
    write_atomic(config_path(state_dir), json.dumps(data, indent=2, sort_keys=True).encode())


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


OS_RELEASE = Path("/etc/os-release")


@functools.cache
def host_os(os_release: Path = OS_RELEASE) -> str:
    """The operating system as operators name it: os-release's PRETTY_NAME and the kernel."""
    pretty = ""
    with contextlib.suppress(OSError):
        for line in os_release.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.partition("=")[2].strip().strip("\"'")[:120]
    kernel = f"{os.uname().sysname} {os.uname().release}"
    return f"{pretty} ({kernel})" if pretty else kernel


def identity() -> dict[str, str]:
    """What a heartbeat says of the agent itself: its version and the machine's OS."""
    return {"version": version(), "os": host_os()}


@functools.cache
def version() -> str:
    """This agent's version as installed; pyproject.toml is its one source.

    Read from the installed METADATA file: importlib.metadata would keep 2.5 MiB of modules
    (email, zipfile, csv) in every agent for this one line.
    """
    for folder in sys.path:
        for meta in sorted(Path(folder or ".").glob("anneal-*.dist-info/METADATA")):
            with contextlib.suppress(OSError), open(meta, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break  # the headers end at the first blank line
    return "unknown"  # run from a source tree that was never installed
