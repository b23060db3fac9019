"""Files a template carries with ``get_file``: text as it is, binary content in a base64 envelope.

Part of the protocol of ``wire`` (standard library only, like it). JSON carries text
only, so a file that is not UTF-8 travels as ``{"anneal:base64": "<base64>"}``, in the
stack request's ``files`` and, through ``get_file``, wherever the template puts it (a
config, an input value); our hooks open it back into the same bytes. A directory is
``{"anneal:directory": {"<relative path>": <text or envelope>, ...}}`` in ``files``;
``get_file`` of it gives the inner map.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

BINARY_KEY = "anneal:base64"
DIRECTORY_KEY = "anneal:directory"


def envelope(data: bytes) -> dict[str, str]:
    """*data* as it crosses JSON: text when it is UTF-8, else the base64 envelope."""
    return {BINARY_KEY: base64.b64encode(data).decode("ascii")}


def carried(data: bytes) -> str | dict[str, str]:
    """A file's content for ``files``: its text when it is UTF-8, else the envelope."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return envelope(data)


def opened(value: Any) -> bytes | None:
    """The bytes of an envelope; None for any other value (a malformed envelope included)."""
    if not (
        isinstance(value, Mapping) and list(value) == [BINARY_KEY] and isinstance(value[BINARY_KEY], str)
    ):
        return None
    try:
        return base64.b64decode(value[BINARY_KEY], validate=True)
    except (binascii.Error, ValueError):
        return None
