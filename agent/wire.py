"""The wire protocol shared by the control plane, the agent and the hooks.

Imports only the standard library, so a server needs nothing heavy to read it; the size
caps on what crosses, and the trimming of a hook's output to them, are in ``wire_caps``.
The per-server document keeps Heat's shape (``deployments`` sorted by name,
each item ``{id, name, group, creation_time, config, inputs, outputs,
options}``); Anneal's own fields live under the top-level key ``anneal``,
which Heat's agents ignore. ``docs/protocol.md`` describes every field.

Errors: ``WireError`` (a ``ValueError``) names the path of what is wrong,
for example ``deployments[1].inputs[0].name: required``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.wire_caps import MAX_DOCUMENT_BYTES

FORMAT = 1
#: Keys of a Heat signal that are not outputs.
SIGNAL_KEYS = ("deploy_stdout", "deploy_stderr", "deploy_status_code")
#: Key of our own extras, in documents and in signals.
EXTRA_KEY = "anneal"
#: Derived inputs that carry the signal credential; not part of what is applied.
CREDENTIAL_INPUTS = frozenset({"deploy_signal_id", "deploy_signal_verb", "deploy_signal_transport"})
_OUTPUT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")


class WireError(ValueError):
    """A document or signal does not match the protocol; the message names the path."""


def safe_output_name(name: str) -> bool:
    """True when *name* may become part of a file name (no separators, no '..')."""
    return bool(_OUTPUT_NAME.match(name)) and ".." not in name


@dataclass(frozen=True)
class InputItem:
    """One input of a derived config: its declaration plus the value given."""

    name: str
    value: Any = None
    type: str = "String"
    description: str | None = None
    default: Any = None
    replace_on_change: bool = False
    #: Anneal's extension: the value is sealed to the server's key in its document.
    secret: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.description is not None:
            out["description"] = self.description
        if self.default is not None:
            out["default"] = self.default
        if self.replace_on_change:
            out["replace_on_change"] = True
        if self.secret:
            out["secret"] = True
        out["value"] = self.value
        return out


@dataclass(frozen=True)
class OutputItem:
    """One declared output of a config."""

    name: str
    type: str = "String"
    description: str | None = None
    error_output: bool = False
    #: Anneal's extension: the value the hook returns is kept and shown as a secret.
    secret: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.description is not None:
            out["description"] = self.description
        out["error_output"] = self.error_output
        if self.secret:
            out["secret"] = True
        return out


@dataclass(frozen=True)
class DeploymentItem:
    """One derived config in Heat's shape: the hook's stdin."""

    id: str
    name: str
    group: str
    creation_time: str
    config: Any = ""
    inputs: tuple[InputItem, ...] = ()
    outputs: tuple[OutputItem, ...] = ()
    options: dict[str, Any] | None = None

    def input_value(self, name: str, default: Any = None) -> Any:
        for item in self.inputs:
            if item.name == name:
                return item.value
        return default

    def input_values(self) -> dict[str, Any]:
        return {item.name: item.value for item in self.inputs}

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "group": self.group,
            "creation_time": self.creation_time,
            "options": self.options,
            "config": self.config,
            "outputs": [o.to_json() for o in self.outputs],
            "inputs": [i.to_json() for i in self.inputs],
        }


@dataclass(frozen=True)
class ItemMeta:
    """Anneal's facts about one document item, kept under ``anneal.deployments``."""

    deployment_id: str
    generation: int
    hash: str
    action: str
    timeout: float | None = None
    #: Fields of the item sealed to the server's key: ``config`` and ``inputs.<name>``.
    sealed: tuple[str, ...] = ()
    #: The control plane gave up on this generation (cancelled, timed out): do not run it, stop it.
    stop: bool = False
    #: The deployment's retry policy (agent/attempts.py): retries, backoff, retry_on, attempt_timeout.
    retry: Mapping[str, Any] | None = None
    #: The newest check asked of this generation (agent/checks.py): run one when above the last done.
    check: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "deployment_id": self.deployment_id,
            "generation": self.generation,
            "hash": self.hash,
            "action": self.action,
        }
        if self.timeout is not None:
            out["timeout"] = self.timeout
        if self.sealed:
            out["sealed"] = list(self.sealed)
        if self.stop:
            out["stop"] = True
        if self.retry:
            out["retry"] = dict(self.retry)
        if self.check:
            out["check"] = self.check
        return out


@dataclass(frozen=True)
class Document:
    """A per-server document: Heat's ``deployments`` plus our serial and hashes."""

    server_id: str
    serial: int
    issued_at: str
    deployments: tuple[DeploymentItem, ...] = ()
    meta: Mapping[str, ItemMeta] = field(default_factory=dict)
    #: Other top-level keys (template metadata, ``os-collect-config``), kept as given.
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: After this time the document must not be applied (``YYYY-MM-DDTHH:MM:SSZ``; empty: Heat's).
    expires_at: str = ""
    #: Where the agent finds its next document and sends its signals (docs/transports.md).
    transport: Mapping[str, Any] | None = None
    #: The control plane this server was handed to: its URL and key (agent/handover.py).
    handover: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out["deployments"] = [d.to_json() for d in sorted(self.deployments, key=_name_key)]
        out[EXTRA_KEY] = {
            "format": FORMAT,
            "server_id": self.server_id,
            "serial": self.serial,
            "issued_at": self.issued_at,
            "deployments": {k: v.to_json() for k, v in sorted(self.meta.items())},
        }
        if self.expires_at:
            out[EXTRA_KEY]["expires_at"] = self.expires_at
        if self.transport is not None:
            out[EXTRA_KEY]["transport"] = dict(self.transport)
        if self.handover is not None:
            out[EXTRA_KEY]["handover"] = dict(self.handover)
        return out

    def encode(self) -> bytes:
        return canonical_json(self.to_json())


@dataclass(frozen=True)
class Signal:
    """The result of one run, in Heat's flat signal form plus our extras."""

    status_code: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: Mapping[str, Any] = field(default_factory=dict)
    #: Anneal extras: config_id, generation, nonce, hash, status. Heat ignores them.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.outputs)
        out["deploy_stdout"] = self.stdout
        out["deploy_stderr"] = self.stderr
        out["deploy_status_code"] = self.status_code
        if self.extra:
            out[EXTRA_KEY] = dict(self.extra)
        return out


def _name_key(item: DeploymentItem) -> tuple[str, str]:
    return (item.name, item.id)


def canonical_json(obj: Any) -> bytes:
    """Deterministic JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# ---------------------------------------------------------------- decoding


def _require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    if key not in obj or obj[key] is None:
        raise WireError(f"{path}.{key}: required")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise WireError(f"{path}.{key}: expected {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _optional(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    value = obj.get(key)
    if value is not None and not isinstance(value, kind):
        raise WireError(f"{path}.{key}: expected {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise WireError(f"{path}: expected an object, got {type(value).__name__}")
    return value


def decode_input(obj: Any, path: str) -> InputItem:
    obj = _mapping(obj, path)
    return InputItem(
        name=_require(obj, "name", str, path),
        value=obj.get("value"),
        type=_optional(obj, "type", str, path) or "String",
        description=_optional(obj, "description", str, path),
        default=obj.get("default"),
        replace_on_change=bool(obj.get("replace_on_change", False)),
        secret=bool(obj.get("secret", False)),
    )


def decode_output(obj: Any, path: str) -> OutputItem:
    obj = _mapping(obj, path)
    return OutputItem(
        name=_require(obj, "name", str, path),
        type=_optional(obj, "type", str, path) or "String",
        description=_optional(obj, "description", str, path),
        error_output=bool(obj.get("error_output", False)),
        secret=bool(obj.get("secret", False)),
    )


def decode_item(obj: Any, path: str = "deployment") -> DeploymentItem:
    """Read one deployment item (Heat's derived config)."""
    obj = _mapping(obj, path)
    inputs = _optional(obj, "inputs", list, path) or []
    outputs = _optional(obj, "outputs", list, path) or []
    return DeploymentItem(
        id=_require(obj, "id", str, path),
        name=_optional(obj, "name", str, path) or "",
        group=_optional(obj, "group", str, path) or "Heat::Ungrouped",
        creation_time=_optional(obj, "creation_time", str, path) or "",
        config=obj.get("config"),
        inputs=tuple(decode_input(x, f"{path}.inputs[{i}]") for i, x in enumerate(inputs)),
        outputs=tuple(decode_output(x, f"{path}.outputs[{i}]") for i, x in enumerate(outputs)),
        options=_optional(obj, "options", dict, path),
    )


def decode_meta(obj: Any, path: str) -> ItemMeta:
    obj = _mapping(obj, path)
    timeout = _optional(obj, "timeout", (int, float), path)
    sealed = _optional(obj, "sealed", list, path) or []
    if not all(isinstance(x, str) for x in sealed):
        raise WireError(f"{path}.sealed: expected a list of field names")
    return ItemMeta(
        deployment_id=_require(obj, "deployment_id", str, path),
        generation=_require(obj, "generation", int, path),
        hash=_require(obj, "hash", str, path),
        action=_require(obj, "action", str, path),
        timeout=float(timeout) if timeout is not None else None,
        sealed=tuple(sealed),
        stop=bool(_optional(obj, "stop", bool, path) or False),
        retry=_optional(obj, "retry", dict, path),
        check=_optional(obj, "check", int, path) or 0,
    )


def loads_capped(raw: bytes, cap: int, what: str) -> Any:
    """Parse JSON of at most *cap* bytes; WireError otherwise."""
    if len(raw) > cap:
        raise WireError(f"{what}: {len(raw)} bytes is over the cap of {cap} bytes")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise WireError(f"{what}: not JSON: {e}") from e


def decode_document(raw: bytes | Mapping[str, Any]) -> Document:
    """Read a per-server document; Heat's documents (without ``anneal``) are accepted too."""
    obj = raw if isinstance(raw, Mapping) else loads_capped(raw, MAX_DOCUMENT_BYTES, "document")
    obj = _mapping(obj, "document")
    items = _optional(obj, "deployments", list, "document") or []
    deployments = tuple(decode_item(x, f"deployments[{i}]") for i, x in enumerate(items))
    seen: set[str] = set()
    for i, d in enumerate(deployments):
        if d.id in seen:
            raise WireError(f"deployments[{i}].id: {d.id!r} appears twice")
        seen.add(d.id)
    extra_obj = obj.get(EXTRA_KEY)
    extra = {k: v for k, v in obj.items() if k not in ("deployments", EXTRA_KEY)}
    if extra_obj is None:
        return Document(server_id="", serial=0, issued_at="", deployments=deployments, extra=extra)
    ours = _mapping(extra_obj, EXTRA_KEY)
    meta_obj = _mapping(ours.get("deployments") or {}, f"{EXTRA_KEY}.deployments")
    meta = {k: decode_meta(v, f"{EXTRA_KEY}.deployments.{k}") for k, v in meta_obj.items()}
    return Document(
        server_id=_require(ours, "server_id", str, EXTRA_KEY),
        serial=_require(ours, "serial", int, EXTRA_KEY),
        issued_at=_optional(ours, "issued_at", str, EXTRA_KEY) or "",
        deployments=deployments,
        meta=meta,
        extra=extra,
        expires_at=_optional(ours, "expires_at", str, EXTRA_KEY) or "",
        transport=_optional(ours, "transport", dict, EXTRA_KEY),
        handover=_optional(ours, "handover", dict, EXTRA_KEY),
    )


def decode_signal(obj: Any, path: str = "signal") -> Signal:
    """Read a signal in Heat's flat form: keys other than ``deploy_*`` are outputs."""
    obj = _mapping(obj, path)
    code = obj.get("deploy_status_code", 0)
    if code is None or code == "":
        code = 0
    if isinstance(code, float) and code.is_integer():  # JSON has one number type: 1.0 is the integer 1
        code = int(code)
    if isinstance(code, bool) or not isinstance(code, (int, str)):
        raise WireError(f"{path}.deploy_status_code: expected an integer, got {type(code).__name__}")
    try:
        status_code = int(code)
    except ValueError as e:
        raise WireError(f"{path}.deploy_status_code: {code!r} is not an integer") from e
    stdout = obj.get("deploy_stdout") or ""
    stderr = obj.get("deploy_stderr") or ""
    for key, value in (("deploy_stdout", stdout), ("deploy_stderr", stderr)):
        if not isinstance(value, str):
            raise WireError(f"{path}.{key}: expected a string, got {type(value).__name__}")
    extra = obj.get(EXTRA_KEY) or {}
    if not isinstance(extra, Mapping):
        raise WireError(f"{path}.{EXTRA_KEY}: expected an object, got {type(extra).__name__}")
    outputs = {k: v for k, v in obj.items() if k not in SIGNAL_KEYS and k != EXTRA_KEY}
    return Signal(status_code, stdout, stderr, outputs, dict(extra))


def sorted_items(items: Iterable[DeploymentItem]) -> list[DeploymentItem]:
    """Deployment items in the order a server runs them (by name, Heat's rule)."""
    return sorted(items, key=_name_key)
