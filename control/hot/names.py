"""The one name grammar: stacks, servers and resources are named as Heat names stacks.

A name has 1 to 255 letters, digits, '_', '-' and '.', and starts with a letter (Heat's
stack-name rule). Resource names keep what templates written for Heat use: they may start
with any of those characters (Heat refuses only '/' in them). Nothing else: no '/', no
spaces, no control characters, so a name is safe in a URL path segment, a log line and a
terminal, and is never a path of its own ('.', '..').
"""

from __future__ import annotations

import re
from typing import Any

MAX_NAME = 255
_NAME = re.compile(rf"[A-Za-z][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}")
_RESOURCE_NAME = re.compile(rf"[A-Za-z0-9_.-]{{1,{MAX_NAME}}}")
RULE = f"starts with a letter and has only letters, digits, '_', '-' and '.', at most {MAX_NAME}"
RESOURCE_RULE = f"has only letters, digits, '_', '-' and '.', 1 to {MAX_NAME} of them"


def name_problem(value: Any, what: str) -> str | None:
    """Why *value* is not a valid name of a *what* (stack, server), or None when it is."""
    if not isinstance(value, str):
        return f"a {what} name is a string"
    if _NAME.fullmatch(value) is None:
        return f"a {what} name {RULE}, not {quoted(value)}"
    return None


def resource_name_problem(value: Any) -> str | None:
    """Why *value* is not a valid resource name, or None when it is."""
    if not isinstance(value, str) or _RESOURCE_NAME.fullmatch(value) is None:
        return f"a resource name {RESOURCE_RULE}, not {quoted(value)}"
    return None


def quoted(value: Any) -> str:
    """A bad name as a message shows it: escaped (no newline or escape code gets through), cut to 60."""
    text = ascii(value) if isinstance(value, str) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."
