"""Evaluating HOT intrinsic functions against a stack: ``resolve`` and ``evaluate_condition``.

``resolve`` evaluates calls bottom-up (arguments first) except ``if``, which evaluates only
the branch it picks. Errors are ``TemplateError(path of the call, "<function>: reason")``.
Secrecy follows values (``taint``): a call given a Secret anywhere in its arguments
returns a Secret; ``get_param`` and ``get_attr`` keep a Secret found on their path;
``if`` on a secret condition returns a Secret. An error of a call given a secret never
quotes it. What the calls build and look up (a Secret's value included) is counted
against the current ``budget`` (a dry run's budget turns a call's other errors into
null: its arguments may be placeholders).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from control.hot import budget, taint
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
    return _apply(name, resolve(args, ctx, at(path, name)), ctx, path)


def _apply(name: str, args: Any, ctx: Context, path: str) -> Any:
    """Call *name* on its evaluated *args*: a Secret among them makes the result a Secret."""
    if name in _SELECTS:
        check_shape(name, args, path)
        return budget.current().take(_SELECTS[name](args, ctx, path), path, name)
    if not taint.tainted(args):
        check_shape(name, args, path)
        if name in TRANSFORMS:
            return TRANSFORMS[name](args, path)
        return budget.current().take(_LOOKUPS[name](args, ctx, path), path, name)
    plain = taint.reveal(args)
    try:
        return taint.Secret(_apply(name, plain, ctx, path))
    except budget.BudgetError:
        raise  # it names sizes and the call, never a value (and a dry run must not tolerate it)
    except TemplateError as e:  # its message may quote the secret, whole or cut short
        raise _masked_error(name, args, ctx, path, e) from None


def _masked_error(name: str, args: Any, ctx: Context, path: str, failed: TemplateError) -> TemplateError:
    """The error of the call made again with each secret as MASK: it cannot quote what it never saw.

    When the masked call does not fail (the error came from the secret's value itself),
    the error says so without quoting anything.
    """
    try:  # on a budget of its own: what it builds is not the template's
        with budget.evaluating(budget.Budget(None)):
            _apply(name, taint.masked(args), ctx, path)
    except TemplateError as e:
        return TemplateError(e.path, taint.mask_text(e.reason, taint.texts(args, 1)))
    return TemplateError(failed.path, f"{name}: cannot be evaluated with the hidden value it was given")


def evaluate_condition(expr: Any, ctx: Context, path: str = "") -> bool:
    """A condition's truth: a boolean, a condition name, or a condition function call."""
    return _truth(resolve(expr, ctx, path), ctx, path)


def _truth(value: Any, ctx: Context, path: str) -> bool:
    """The truth of an evaluated condition: a boolean, or the name of a condition."""
    plain = taint.reveal(value)
    if isinstance(plain, bool):
        return plain
    if isinstance(plain, str):
        return bool(ctx.condition(plain))
    raise TemplateError(path, f"a condition must be true, false or a condition name, not {show(value)}")


def select(value: Any, keys: list[Any], missing: Any = None) -> Any:
    """Follow map keys and list indices (ints or digit strings); ``missing`` when it cannot.

    A Secret on the way makes the result a Secret (a member of a secret map is secret).
    """
    if taint.tainted(keys):
        return taint.Secret(select(taint.reveal(value), taint.reveal(keys), missing))
    for i, key in enumerate(keys):
        if isinstance(value, taint.Secret):
            return taint.Secret(select(value.value, keys[i:], missing))
        value = _step(value, key, missing)
        if value is missing:
            return missing
    return value


def _step(value: Any, key: Any, missing: Any) -> Any:
    """One map key or list index down from *value*; ``missing`` when there is none."""
    if isinstance(key, bool) or not isinstance(key, str | int):
        return missing
    if isinstance(value, Mapping):
        return value.get(key, missing)
    if isinstance(value, list):
        try:
            return value[int(key)]
        except (ValueError, IndexError):
            return missing
    return missing


def _get_param(a: Any, ctx: Context, path: str) -> Any:
    """get_param: NAME or [NAME, key/index, ...]; a path that leads nowhere gives '' (Heat)."""
    name, keys = (a, []) if isinstance(a, str) else (a[0], list(a[1:]))
    if isinstance(name, taint.Secret):
        return taint.Secret(_get_param(taint.reveal(a), ctx, path))
    if not isinstance(name, str):
        raise TemplateError(path, "get_param: the parameter name must be a string")
    return select(ctx.param(name), keys, "")


def _get_resource(a: Any, ctx: Context, path: str) -> Any:
    """get_resource: NAME gives the resource's id."""
    return ctx.resource_id(a)


def _get_attr(a: Any, ctx: Context, path: str) -> Any:
    """get_attr: [RESOURCE, ATTRIBUTE, key/index, ...]; None when the attribute or path is absent."""
    if taint.tainted(a[:2]):
        return taint.Secret(_get_attr(taint.reveal(a), ctx, path))
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
    where = at(at(path, "if"), 0)
    condition = resolve(args[0], ctx, where)
    chosen = 1 if _truth(condition, ctx, where) else 2
    if chosen >= len(args):
        return OMITTED
    value = _resolve(args[chosen], ctx, at(at(path, "if"), chosen))
    return value if value is OMITTED else taint.taint(value, condition)


def _truths(a: Any, ctx: Context, path: str, name: str) -> Iterator[bool]:
    """and/or: [CONDITION, CONDITION, ...]; names refer to the conditions section."""
    for i, value in enumerate(a):
        yield _truth(value, ctx, at(at(path, name), i))


# Reading a stack value along a path: a Secret on the path taints what is read, not the rest.
_SELECTS: dict[str, Callable[[Any, Context, str], Any]] = {
    "get_param": _get_param,
    "get_attr": _get_attr,
}
# get_* read the stack; the condition functions may name a condition of it.
_LOOKUPS: dict[str, Callable[[Any, Context, str], Any]] = {
    "get_resource": _get_resource,
    "get_file": _get_file,
    "resource_facade": lambda a, c, p: c.facade(a),
    "equals": lambda a, c, p: a[0] == a[1],
    "not": lambda a, c, p: not _truth(a, c, at(p, "not")),
    "and": lambda a, c, p: all(_truths(a, c, p, "and")),
    "or": lambda a, c, p: any(_truths(a, c, p, "or")),
}
