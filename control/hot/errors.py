"""The one error of the template package, and the path notation and value quoting of its messages.

A path names a place in a template or environment the way a reader would point at it:
``resources.web.properties.inputs[1].type``; map keys join with dots, list indices go in
brackets. Every problem the package finds is a ``TemplateError(path, reason)``.
"""

from __future__ import annotations

import json
from typing import Any


class TemplateError(Exception):
    """A template, environment or parameter is invalid: ``path`` says where, ``reason`` why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def at(path: str, key: object) -> str:
    """The path of ``key`` (a map key, or a list index when an int) below ``path``."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def show(value: Any) -> str:
    """A value as a message quotes it: JSON, cut to 80 characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
