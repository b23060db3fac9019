"""Evaluating HOT intrinsic functions against a stack: ``resolve`` and ``evaluate_condition``.

``resolve`` evaluates calls bottom-up (arguments first) except ``if``, which evaluates only
the branch it picks. Errors are ``TemplateError(path of the call, "<function>: reason")``.
What the calls build and look up is counted against the current ``budget`` (a dry run's
budget turns a call's other errors into null: its arguments may be placeholders).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from control.hot import budget
from control.hot.errors import TemplateError, at, show
from control.hot.functions import call_of, check_shape
from control.hot.transforms import TRANSFORMS


class Context(Protocol):
    """What evaluation needs from the stack being built."""

    def param(self, name: str) -> Any: ...
    def resource_id(self, name: str) -> Any: ...
    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        """Resource *name*'s *attribute*, followed along *path* (keys and indices)."""
        ...

    def file(self, path: str) -> Any: ...
    def condition(self, name: str) -> bool: ...
    def facade(self, key: str) -> Any:
        """``resource_facade``: what the resource that made this (nested) stack has under *key*."""
        ...


class _Omitted:
    """What a two-argument ``if`` gives when false: its list item or map entry is left out."""


OMITTED = _Omitted()


def resolve(node: Any, ctx: Context, path: str = "") -> Any:
    """Evaluate every intrinsic function in ``node``; returns new maps and lists."""
    value = _resolve(node, ctx, path)
    return None if value is OMITTED else value


def _resolve(node: Any, ctx: Context, path: str) -> Any:
    call = call_of(node)
    if call is not None:
        name, args = call
        check_shape(name, args, path)
        try:
            return _call(name, args, ctx, path)
        except TemplateError as e:
            if not budget.current().tolerates(e):
                raise
            return None
    if isinstance(node, Mapping):
        pairs = ((key, _resolve(value, ctx, at(path, key))) for key, value in node.items())
        return {key: value for key, value in pairs if value is not OMITTED}
    if isinstance(node, list):
        items = (_resolve(value, ctx, at(path, i)) for i, value in enumerate(node))
        return [value for value in items if value is not OMITTED]
    return node


def _call(name: str, args: Any, ctx: Context, path: str) -> Any:
    if name == "if":
        return _if(args, ctx, path)
    resolved = resolve(args, ctx, at(path, name))
    check_shape(name, resolved, path)
    if name in TRANSFORMS:
        return TRANSFORMS[name](resolved, path)
    return budget.current().take(_LOOKUPS[name](resolved, ctx, path), path, name)


def evaluate_condition(expr: Any, ctx: Context, path: str = "") -> bool:
    """A condition's truth: a boolean, a condition name, or a condition function call."""
    return _truth(resolve(expr, ctx, path), ctx, path)


def _truth(value: Any, ctx: Context, path: str) -> bool:
    """The truth of an evaluated condition: a boolean, or the name of a condition."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return bool(ctx.condition(value))
    raise TemplateError(path, f"a condition must be true, false or a condition name, not {show(value)}")


def select(value: Any, keys: list[Any], missing: Any = None) -> Any:
    """Follow map keys and list indices (ints or digit strings); ``missing`` when it cannot."""
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, str | int):
            return missing
        if isinstance(value, Mapping):
            if key not in value:
                return missing
            value = value[key]
        elif isinstance(value, list):
            try:
                value = value[int(key)]
            except (ValueError, IndexError):
                return missing
        else:
            return missing
    return value


def _get_param(a: Any, ctx: Context, path: str) -> Any:
    """get_param: NAME or [NAME, key/index, ...]; a path that leads nowhere gives '' (Heat)."""
    name, keys = (a, []) if isinstance(a, str) else (a[0], list(a[1:]))
    if not isinstance(name, str):
        raise TemplateError(path, "get_param: the parameter name must be a string")
    return select(ctx.param(name), keys, "")


def _get_resource(a: Any, ctx: Context, path: str) -> Any:
    """get_resource: NAME gives the resource's id."""
    return ctx.resource_id(a)


def _get_attr(a: Any, ctx: Context, path: str) -> Any:
    """get_attr: [RESOURCE, ATTRIBUTE, key/index, ...]; None when the attribute or path is absent."""
    if not (isinstance(a[0], str) and isinstance(a[1], str)):
        raise TemplateError(path, "get_attr: the resource and attribute names must be strings")
    return ctx.attribute(a[0], a[1], list(a[2:]))


def _get_file(a: Any, ctx: Context, path: str) -> Any:
    """get_file: PATH gives the text of that entry of the stack's files."""
    return ctx.file(a)


def _if(args: Any, ctx: Context, path: str) -> Any:
    """if: [CONDITION, VALUE_IF_TRUE, VALUE_IF_FALSE]; only the chosen value is evaluated.

    Without VALUE_IF_FALSE (2021-04-16), a false condition leaves out the list item or map
    entry the call stands in (OMITTED), as Heat's IfNullable does.
    """
    if call_of(args) is not None:
        args = resolve(args, ctx, at(path, "if"))
        check_shape("if", args, path)
    chosen = 1 if evaluate_condition(args[0], ctx, at(at(path, "if"), 0)) else 2
    if chosen >= len(args):
        return OMITTED
    return _resolve(args[chosen], ctx, at(at(path, "if"), chosen))


def _truths(a: Any, ctx: Context, path: str, name: str) -> Iterator[bool]:
    """and/or: [CONDITION, CONDITION, ...]; names refer to the conditions section."""
    for i, value in enumerate(a):
        yield _truth(value, ctx, at(at(path, name), i))


# get_* read the stack; the condition functions may name a condition of it.
_LOOKUPS: dict[str, Callable[[Any, Context, str], Any]] = {
    "get_param": _get_param,
    "get_resource": _get_resource,
    "get_attr": _get_attr,
    "get_file": _get_file,
    "resource_facade": lambda a, c, p: c.facade(a),
    "equals": lambda a, c, p: a[0] == a[1],
    "not": lambda a, c, p: not _truth(a, c, at(p, "not")),
    "and": lambda a, c, p: all(_truths(a, c, p, "and")),
    "or": lambda a, c, p: any(_truths(a, c, p, "or")),
}
