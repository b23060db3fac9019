"""Secrecy as a property of a value: whatever is computed from a secret is a ``Secret`` too.

A hidden parameter's value, an ``OS::Heat::RandomString``'s value and whatever a
function builds from either (a member, a part of a string, a join, a digest, a map
whose key is one) is wrapped in ``Secret``. The wrapper goes where the value goes:
into resource properties and attributes, config bodies, deployment inputs and
outputs, and into the database (encrypted JSON columns store it under ``MARK``).
Where a value leaves the control plane, a ``Secret`` is sealed to the server's key
(documents) or shown as ``MASK`` (API, CLI, logs, error messages: its ``str`` is
``MASK``). Text a hook writes back cannot carry the wrapper; it is searched for the
secret texts it was given (``texts``) instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, final

from control.hot import sharing

MASK = "******"
#: The key a Secret is stored under in JSON (a NUL first: no HOT or YAML key a person writes).
MARK = "\u0000anneal:secret"
#: MARK as it appears inside JSON text, to skip the decoding walk when no secret is stored.
MARK_JSON = json.dumps(MARK)[1:-1].encode()
#: Secret texts shorter than this are not searched for in what hooks write back (they match anything).
MIN_TEXT = 4
#: Types a template's values mostly are, none of them a Mapping (``is_mapping``'s quick answer).
_PLAIN = frozenset({str, int, float, bool, type(None), list})


def is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, answered without the ABC check for plain JSON values (a walk of a
    big template asks it of every node)."""
    kind = type(value)
    return kind is dict or (kind not in _PLAIN and isinstance(value, Mapping))


@final
class Secret:
    """A value derived from a secret; never shown, compared only with other Secrets."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = reveal(value)  # one wrapper around plain JSON, never nested

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self.value == other.value

    def __hash__(self) -> int:
        return hash(json.dumps(self.value, sort_keys=True, default=str))

    def __repr__(self) -> str:
        return MASK

    __str__ = __repr__

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self


def reveal(value: Any) -> Any:
    """*value* with every Secret replaced by what it holds (for computing, sealing or the hook)."""
    if isinstance(value, Secret):
        return value.value
    if isinstance(value, Mapping):
        return {reveal(k): reveal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [reveal(v) for v in value]
    return value


def tainted(value: Any) -> bool:
    """Whether *value* is or holds a Secret (map keys included)."""
    if isinstance(value, Secret):
        return True
    if is_mapping(value):
        return any(tainted(k) or tainted(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(tainted(v) for v in value)
    return False


def taint(value: Any, source: Any) -> Any:
    """*value* as a whole Secret when *source* holds one, else unchanged (tainted in, tainted out)."""
    return Secret(value) if tainted(source) else value


def masked(value: Any) -> Any:
    """*value* with every Secret shown as MASK (a map keyed by a secret is masked whole)."""
    if isinstance(value, Secret):
        return MASK
    if isinstance(value, Mapping):
        if any(isinstance(k, Secret) for k in value):
            return MASK
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [masked(v) for v in value]
    return value


def texts(value: Any, minimum: int = MIN_TEXT) -> set[str]:
    """The texts each Secret in *value* stands for: its strings and numbers, also JSON-escaped."""
    found: set[str] = set()
    for secret in _secrets(value):
        for leaf in _leaves(secret.value):
            text = leaf if isinstance(leaf, str) else json.dumps(leaf)
            if len(text) >= minimum:
                found.add(text)
                found.add(json.dumps(text, ensure_ascii=False)[1:-1])
    return found


def mask_text(text: str, secrets: Iterable[str]) -> str:
    """*text* with each of *secrets* in it replaced by MASK, longest first."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


def dumps_masked(data: Any) -> str:
    """JSON of an answer (the API's, Heat's API's): a Secret that reached it anyway shows as MASK.

    A map keyed by a Secret is masked whole, as ``masked`` does; json's ``default`` never sees
    keys, so such an answer is walked once more only then.
    """
    try:
        return json.dumps(data, default=_mask_default)
    except TypeError:
        return json.dumps(masked(data), default=_mask_default)


def _mask_default(value: Any) -> Any:
    if isinstance(value, Secret):
        return MASK
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_default(value: Any) -> Any:
    """``json.dumps(default=...)``: a Secret is stored as ``{MARK: value}``."""
    if isinstance(value, Secret):
        return {MARK: value.value}
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_hook(obj: dict[str, Any]) -> Any:
    """``json.loads(object_hook=...)``: ``{MARK: value}`` is a Secret again."""
    if len(obj) == 1 and MARK in obj:
        return Secret(obj[MARK])
    return obj


def loads(text: str | bytes, *, shared: bool = False) -> Any:
    """``json.loads`` that makes stored Secrets Secrets again (and walks nothing when none is stored);
    *shared*: equal parts decoded as one object (``sharing.loads``), for a value nothing writes into."""
    stored = (MARK_JSON.decode() in text) if isinstance(text, str) else (MARK_JSON in text)
    if shared:
        return sharing.loads(text, (lambda pairs: json_hook(dict(pairs))) if stored else dict)
    return json.loads(text, object_hook=json_hook) if stored else json.loads(text)


def _secrets(value: Any) -> Iterable[Secret]:
    if isinstance(value, Secret):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _secrets(k)
            yield from _secrets(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _secrets(v)


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield k
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield value
