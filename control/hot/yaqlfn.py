"""HOT's ``yaql`` function (Heat's since 2016-10-14): an expression over ``data``, bounded in size and time.

Evaluated with the ``yaql`` package Heat uses, with Heat's default bounds on what an
expression may build (``limit_iterators`` 200 elements, ``memory_quota`` 10,000 bytes)
and, which Heat has not, a bound on the time it may take (TIME_LIMIT seconds, and
budget.YAQL_SECONDS for all of an evaluation's expressions): an expression such as a join
of two 150-element lists otherwise runs for tens of seconds inside the engine. Its result
is charged to the evaluation budget like any function's. A bound broken is a BudgetError,
so a stack create's dry run refuses it, naming the path.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from types import FrameType
from typing import Any

from control.hot import budget
from control.hot.errors import TemplateError

LIMIT_ITERATORS = 200
MEMORY_QUOTA = 10_000
TIME_LIMIT = 2.0
#: yaql's parser (ply) keeps its state on one shared object: one thread parses at a time (the
#: engine evaluates yaql in worker threads, a create's dry run in another).
_PARSING = threading.Lock()


@functools.cache
def _engine() -> tuple[Any, Any]:
    """yaql's parser factory and root context, made on first use (importing yaql takes a while)."""
    # Imported here, not at the top: the CLI imports control.hot and never evaluates yaql.
    import collections.abc  # noqa: F401, PLC0415 (yaql 3.2 reads collections.abc without importing it)

    import yaql  # noqa: PLC0415

    options = {"yaql.limitIterators": LIMIT_ITERATORS, "yaql.memoryQuota": MEMORY_QUOTA}
    return yaql.YaqlFactory().create(options), yaql.create_context()


def parse(expression: Any, path: str) -> Any:
    """The parsed expression; TemplateError naming *path* when it is not a yaql expression."""
    if not isinstance(expression, str):
        raise TemplateError(path, "yaql: the expression must be a string")
    from yaql.language import exceptions  # noqa: PLC0415 (as in _engine)

    try:
        with _PARSING:
            return _engine()[0](expression)
    except exceptions.YaqlException as e:
        raise TemplateError(path, f"yaql: bad expression: {e}") from None


def evaluate(args: Any, path: str) -> Any:
    """yaql: {expression, data}: the expression's value with ``$.data`` the data."""
    statement = parse(args["expression"], path)
    data = args.get("data", {})
    if data is not None and not isinstance(data, Mapping | list | str | int | float | bool):
        raise TemplateError(path, "yaql: data must be a map, a list or a scalar")
    result = _run(statement, data, path)
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        raise TemplateError(path, f"yaql: the result is not JSON data ({type(result).__name__})") from None
    # yaql's own quotas bound what it builds; what it gives is charged as any function's result
    budget.meter(path, "yaql").add(budget.current().size(result))
    return result


def _run(statement: Any, data: Any, path: str) -> Any:
    """The statement's value, within TIME_LIMIT and the time the evaluation has left for yaql."""
    from yaql.language import exceptions  # noqa: PLC0415 (as in _engine)

    spent = budget.current()
    limit = min(TIME_LIMIT, max(spent.yaql_left, 0.001))
    started = time.monotonic()
    try:
        with _deadline(limit):
            return statement.evaluate({"data": data}, _engine()[1].create_child_context())
    except TimeoutError:
        if limit < TIME_LIMIT:
            raise budget.BudgetError(
                path,
                f"yaql: the template's yaql expressions took longer than {spent.yaql_seconds:g} s in all",
            ) from None
        raise budget.BudgetError(path, f"yaql: the expression took longer than {TIME_LIMIT:g} s") from None
    except (exceptions.CollectionTooLargeException, exceptions.MemoryQuotaExceededException) as e:
        raise budget.BudgetError(path, f"yaql: {type(e).__name__}: {e}") from None
    except Exception as e:  # yaql raises many kinds (its own, TypeError, KeyError...) for bad input
        raise TemplateError(path, f"yaql: {type(e).__name__}: {e}") from None
    finally:
        spent.yaql_left -= time.monotonic() - started


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in this thread's Python code once *seconds* have passed (a trace hook)."""
    end = time.monotonic() + seconds
    previous = sys.gettrace()

    def check(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > end:
            raise TimeoutError
        return check

    sys.settrace(check)
    try:
        yield
    finally:
        sys.settrace(previous)
