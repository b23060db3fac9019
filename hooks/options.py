"""Reading a deployment's ``options``: each getter names the option and the type it wants."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.wire import DeploymentItem
from hooks.common import json_kind
from hooks.errors import OptionError


def options_of(deployment: DeploymentItem) -> Mapping[str, Any]:
    return deployment.options or {}


def get_bool(options: Mapping[str, Any], key: str, default: bool) -> bool:
    """A true/false option; the strings Heat templates often carry ("true", "false") are accepted."""
    value = options.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    raise OptionError(f"options.{key}: expected true or false, got {json_kind(value)}")


def get_str(options: Mapping[str, Any], key: str) -> str | None:
    """A string option; None when absent or empty."""
    value = options.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise OptionError(f"options.{key}: expected a string, got {json_kind(value)}")
    if "\0" in value:
        raise OptionError(f"options.{key}: contains a NUL character")
    return value


def get_words(options: Mapping[str, Any], key: str) -> list[str]:
    """A list of names: a list of strings, or one string with commas between them."""
    value = options.get(key)
    if value is None or value == "":
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise OptionError(f"options.{key}: expected a string or a list of strings, got {json_kind(value)}")
    words = [i.strip() for i in items if i.strip()]
    if any("\0" in w or w.startswith("-") for w in words):
        raise OptionError(f"options.{key}: names may not start with '-' or contain NUL")
    return words
