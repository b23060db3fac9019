"""Checks that need to know what resource types do: they live in control/hot/stackcheck.py.

There, `anneal template validate` runs them offline through the same function.
"""

from __future__ import annotations

from control import hot


def check_definition(template: hot.Template) -> list[str]:
    """Raise hot.TemplateError for what would fail later (an unsupported transport); the warnings."""
    return hot.check_types(template)
