"""The one error of the template package, and the path notation its messages use.

A path names a place in a template or environment the way a reader would point at it:
``resources.web.properties.inputs[1].type``; map keys join with dots, list indices go in
brackets. Every problem the package finds is a ``TemplateError(path, reason)``.
"""

from __future__ import annotations


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
