"""Errors a hook raises when it cannot run a deployment; ``hooks.common.main`` reports them.

Each carries the ``status_code`` the failure result gets (its ``deploy_status_code``). All live
here but the one marked with its module::

    HookError               a deployment this hook cannot run (status 1)
    ├── OptionError         an option (``options.<key>``) or a hook setting in the environment
    ├── ConfigError         the config, the deployment id or an output name cannot be used
    │                       (not ``agent.errors.ConfigError``, the agent's own settings)
    ├── ToolNotFoundError   the tool or the script interpreter is missing (status 127)
    └── TerminatedError     the hook was sent SIGTERM while it ran (status 143)

    WireError               (agent.wire, a ValueError) stdin holds no readable deployment:
                            the hook writes nothing and exits 2 (``EXIT_BAD_INPUT``)

Any other exception is a bug of the hook: ``main`` logs its traceback and reports the
deployment failed (status 1). Every exit path writes a result or exits non-zero.
"""

from __future__ import annotations


class HookError(Exception):
    """A deployment this hook cannot run; the message is shown to the user as is."""

    status_code = 1


class OptionError(HookError):
    """An option of the deployment or a hook setting in the environment is invalid."""


class ConfigError(HookError):
    """The config, the deployment id or an output name cannot be used."""


class ToolNotFoundError(HookError):
    """The tool or the script interpreter is not installed."""

    status_code = 127


class TerminatedError(HookError):
    """The hook was asked to stop (SIGTERM) before its tool finished."""

    status_code = 143
