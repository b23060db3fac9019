"""Columns that may hold secrets are stored encrypted (AES-256-GCM with the data key).

The data key is ``<data dir>/data-key`` (0600). It is attached to the database
engine's dialect when the database is opened, so each control plane in a process
uses its own key and no global holds it. A stored value is
``{"anneal_enc": "v1", "kid": <key id>, "ct": base64(nonce || ciphertext)}``, and a
Secret (``control/hot/taint.py``) inside it stays a Secret when read back. A value
without that shape was written before encryption and is read as it is (and
encrypted on its next write), so an existing database keeps working.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from control.hot import taint

DIALECT_ATTR = "anneal_data_key"
_AAD = b"anneal-db-v1"
#: Abandon data's sealed values: another associated data, so one cannot pass for a column's.
_SEALED_AAD = b"anneal-abandon-v1"
SEALED = "anneal_sealed"


class DataKeyError(RuntimeError):
    """The database holds values this control plane's data key cannot read."""


@functools.lru_cache(maxsize=8)
def key_id(key: bytes) -> str:
    """The key's public name stored with each value (cached: every read and write asks for it)."""
    return hashlib.sha256(b"anneal-data-key:" + key).hexdigest()[:12]


@functools.lru_cache(maxsize=8)
def _cipher(key: bytes) -> AESGCM:
    """The key's AES-GCM object (cached: a big step encrypts and decrypts a few values per row)."""
    return AESGCM(key)


#: The encoder of stored values (one object: ``json.dumps`` with options builds one per call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=taint.json_default)


def encrypt(key: bytes, value: Any, aad: bytes = _AAD) -> dict[str, str]:
    """*value* stored: ``ct`` is base64(nonce || ciphertext). Each copy of a big value (a million
    deployments' template is 240 MB of JSON) is let go as the next is made, so no more than two
    are alive at once (there were five)."""
    nonce = os.urandom(12)
    data = _ENCODER.encode(value).encode()
    data = _cipher(key).encrypt(nonce, data, aad)
    data = nonce + data
    data = base64.b64encode(data)
    return {"anneal_enc": "v1", "kid": key_id(key), "ct": data.decode()}


def seal(key: bytes, value: Any) -> dict[str, str]:
    """*value* as abandon data carries a secret: only a control plane holding *key* opens it."""
    enc = encrypt(key, value, _SEALED_AAD)
    return {SEALED: "v1", "kid": enc["kid"], "ct": enc["ct"]}


def is_sealed(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SEALED) == "v1" and set(value) == {SEALED, "kid", "ct"}


def unseal(key: bytes, sealed: dict[str, Any]) -> Any:
    """What seal() sealed (a Secret stays one); DataKeyError for another key or altered text."""
    try:
        return decrypt(key, sealed, _SEALED_AAD)
    except (ValueError, TypeError) as e:  # the text came from outside: not base64, not text
        raise DataKeyError(f"a sealed value is not well formed: {e}") from e


def decrypt(key: bytes, stored: dict[str, Any], aad: bytes = _AAD) -> Any:
    if stored.get("kid") != key_id(key):
        raise DataKeyError(
            f"a value was encrypted with data key {stored.get('kid')}, not this data dir's key"
        )
    raw = base64.b64decode(stored["ct"])
    try:
        return taint.loads(_cipher(key).decrypt(raw[:12], raw[12:], aad))
    except (InvalidTag, ValueError) as e:  # ValueError: a ciphertext too short to hold a tag
        raise DataKeyError("an encrypted value does not authenticate (altered?)") from e


def attach_key(dialect: Dialect, key: bytes) -> None:
    setattr(dialect, DIALECT_ATTR, key)


def _key(dialect: Dialect) -> bytes:
    key = getattr(dialect, DIALECT_ATTR, None)
    if not key:
        raise DataKeyError("the database was opened without a data key; secrets would be stored in clear")
    return bytes(key)


class EncryptedJSON(TypeDecorator[Any]):
    """A JSON column whose whole value is encrypted at rest."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        return encrypt(_key(dialect), value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return _opened(dialect, value)


def _opened(dialect: Dialect, value: Any) -> Any:
    if isinstance(value, dict) and value.get("anneal_enc") == "v1":
        return decrypt(_key(dialect), value)
    return value


def from_text(dialect: Dialect, text: str | None) -> Any:
    """An EncryptedJSON column's value from its stored text (read with ``CAST(... AS TEXT)``).

    A big step reads a column of every resource this way and opens only those it needs:
    the text is one object, its decrypted value tens (engine/slices.py ``Light``)."""
    return None if text is None else _opened(dialect, json.loads(text))
