"""A deployment's `retry` property: its schema, its literal checks and the policy agents run.

``retry: {retries: 3, backoff: {initial: 1, factor: 2, max: 60}, retry_on: [failure],
attempt_timeout: 300}``. The agent (agent/attempts.py) runs a failed attempt again, in the
same generation, while ``retries`` allow and the failure is one ``retry_on`` names: an exit
code, ``failure`` (any non-zero code), ``timeout`` (the attempt ran past ``attempt_timeout``) or
``interrupted`` (the agent restarted while it ran). The deployment's ``timeout`` bounds all attempts together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.hot.errors import TemplateError, at, show
from control.hot.functions import call_of
from control.hot.schema import PropSpec

MAX_RETRIES = 20
WORDS = ("failure", "timeout", "interrupted")
DEFAULTS = {"initial": 1.0, "factor": 2.0, "max": 60.0}
BACKOFF = {
    "initial": PropSpec("number", default=DEFAULTS["initial"]),
    "factor": PropSpec("number", default=DEFAULTS["factor"]),
    "max": PropSpec("number", default=DEFAULTS["max"]),
}
SCHEMA = {
    "retries": PropSpec("integer", default=0),
    "backoff": PropSpec("map", schema=BACKOFF),
    "retry_on": PropSpec("list", default=["failure"]),
    "attempt_timeout": PropSpec("number"),
}
SPEC = PropSpec("map", schema=SCHEMA)


def check(props: Mapping[Any, Any], path: str) -> None:
    """The literal checks of a resource's `retry` that its schema cannot say (ranges, retry_on)."""
    value = props.get("retry")
    if isinstance(value, Mapping) and call_of(value) is None and _literal(value):
        policy(value, at(path, "retry"))


def _literal(value: Mapping[Any, Any]) -> bool:
    """True when no part is a function call (those are checked once resolved, by the handler)."""
    backoff, retry_on = value.get("backoff"), value.get("retry_on")
    parts = [*value.values(), *(backoff.values() if isinstance(backoff, Mapping) else ())]
    parts += retry_on if isinstance(retry_on, list) else []
    return all(call_of(part) is None for part in parts)


def policy(value: Any, path: str) -> dict[str, Any] | None:
    """The policy as documents carry it, from a resolved `retry`; None for no retries."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TemplateError(path, f"expected a map, got {show(value)}")
    retries = value.get("retries") or 0
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= MAX_RETRIES:
        raise TemplateError(at(path, "retries"), f"{show(retries)} is not an integer in 0..{MAX_RETRIES}")
    backoff = {**DEFAULTS, **{k: v for k, v in (value.get("backoff") or {}).items() if v is not None}}
    for key, least in (("initial", 0.0), ("factor", 1.0), ("max", 0.0)):
        if not isinstance(backoff[key], int | float) or backoff[key] < least:
            raise TemplateError(
                at(at(path, "backoff"), key), f"{show(backoff[key])} is not a number >= {least:g}"
            )
    retry_on = value.get("retry_on") or ["failure"]
    for i, item in enumerate(retry_on):
        if item not in WORDS and not (
            isinstance(item, int) and not isinstance(item, bool) and 0 < item < 256
        ):
            raise TemplateError(
                at(at(path, "retry_on"), i),
                f"{show(item)} is not an exit code 1..255, failure, timeout or interrupted",
            )
    attempt_timeout = value.get("attempt_timeout")
    if attempt_timeout is not None and (not isinstance(attempt_timeout, int | float) or attempt_timeout <= 0):
        raise TemplateError(
            at(path, "attempt_timeout"), f"{show(attempt_timeout)} is not a number of seconds > 0"
        )
    if retries == 0:
        return None
    out = {
        "retries": retries,
        "backoff": {k: float(v) for k, v in backoff.items()},
        "retry_on": list(retry_on),
    }
    if attempt_timeout is not None:
        out["attempt_timeout"] = float(attempt_timeout)
    return out
