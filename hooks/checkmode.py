"""Check mode: a hook asked (``ANNEAL_CHECK=1``) whether the server still matches its config.

A check changes nothing. Its result is an ordinary signal whose ``anneal.check`` is the
verdict (``in_sync``, ``drifted`` or ``unknown``), ``anneal.reason`` says why when it is not
in sync, and ``deploy_stdout`` carries the tool's diff (docs/protocol.md, "Checks").
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.wire import Signal
from agent.wire_caps import CHECK_ENV, CHECK_STATES, MAX_CHECK_DIFF, MAX_CHECK_REASON, trim_stream

IN_SYNC, DRIFTED, UNKNOWN = CHECK_STATES
STATES = frozenset(CHECK_STATES)


def requested(env: Mapping[str, str]) -> bool:
    """True when the agent runs this hook to check, not to apply."""
    return env.get(CHECK_ENV) == "1"


def verdict(state: str, diff: str = "", reason: str = "") -> Signal:
    """A check's result: the verdict, the diff (trimmed) and why."""
    reason = trim_stream(reason.strip(), MAX_CHECK_REASON)
    return Signal(stdout=trim_stream(diff, MAX_CHECK_DIFF), extra={"check": state, "reason": reason})


def unsupported(name: str, why: str = "") -> Signal:
    """``unknown``: this hook (or this config) cannot check without changing the server."""
    return verdict(UNKNOWN, reason=why or f"the {name} hook has no check mode")
