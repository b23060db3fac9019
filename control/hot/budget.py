"""What one evaluation of a template may build: bytes per function call, bytes in all, pattern
and yaql time.

Every function that builds a value asks a ``Meter`` for the bytes before it allocates them, so
a small template is refused before it has built gigabytes; all calls of one evaluation share a
``Budget``. A value is counted as it would be stored: a string's characters, plus SLOT for each
scalar, list item and map entry. ``evaluating(budget)`` makes a budget the current one; with
none, each call has its own per-call cap and no total.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from control.hot import taint
from control.hot.errors import TemplateError

#: Cap on what one function call may build (bytes), whatever the total.
MAX_CALL_BYTES = 8 * 1024 * 1024
#: Default cap on what one evaluation of a template builds in all (`anneal serve --max-evaluation-bytes`).
DEFAULT_TOTAL_BYTES = 64 * 1024 * 1024
#: Seconds all the allowed_pattern checks of one evaluation may take together.
PATTERN_SECONDS = 1.0
#: Seconds all the yaql expressions of one evaluation may take together (each at most yaqlfn.TIME_LIMIT).
YAQL_SECONDS = 5.0
#: What a scalar, list item or map entry counts for beyond its text.
SLOT = 16
#: Containers at least this big keep their size, so a value shared many times is walked once.
_REMEMBER = 1024


class BudgetError(TemplateError):
    """Evaluating the template would build more than its budget allows; ``path`` names the call."""


class Budget:
    """The bytes left to one evaluation and the pattern-matching and yaql time left to it."""

    def __init__(
        self,
        total: int | None = DEFAULT_TOTAL_BYTES,
        *,
        patterns: bool = True,
        pattern_seconds: float = PATTERN_SECONDS,
        yaql_seconds: float = YAQL_SECONDS,
    ) -> None:
        self.total, self.used = total, 0
        #: False where parameter values were checked before (the engine re-reading a stack).
        self.patterns = patterns
        self.pattern_seconds = self.pattern_left = pattern_seconds
        self.yaql_seconds = self.yaql_left = yaql_seconds
        #: True while a dry run tolerates errors that a placeholder (get_attr: null) may cause.
        self.lenient = False
        self._sizes: dict[int, tuple[Any, int]] = {}

    def spend(self, size: int, path: str, name: str) -> None:
        """Count *size* bytes built by the call at *path*; BudgetError past the total."""
        self.check(size, path, name)
        self.used += size

    def check(self, size: int, path: str, name: str) -> None:
        """BudgetError if *size* more bytes would go past the total."""
        if self.total is not None and self.used + size > self.total:
            raise BudgetError(
                path,
                f"{name}: evaluating the template would build more than {self.total} bytes "
                "(the evaluation budget, `anneal serve --max-evaluation-bytes`)",
            )

    def take(self, value: Any, path: str, name: str) -> Any:
        """*value*, found by a lookup (get_param, get_file ...), counted against the total."""
        self.spend(self.size(value), path, name)
        return value

    def size(self, value: Any) -> int:
        """The bytes *value* counts for: its strings' characters plus SLOT per scalar, item and entry."""
        if isinstance(value, str):
            return len(value)
        if isinstance(value, taint.Secret):  # a hidden value counts as what it holds
            return self.size(value.value)
        if not isinstance(value, Mapping | list):
            return SLOT
        known = self._sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        if isinstance(value, Mapping):
            size = SLOT + sum(SLOT + self.size(k) + self.size(v) for k, v in value.items())
        else:
            size = SLOT + sum(SLOT + self.size(v) for v in value)
        if size >= _REMEMBER:
            self._sizes[id(value)] = (value, size)
        return size

    @contextlib.contextmanager
    def leniently(self) -> Iterator[None]:
        """A dry run: a call's other errors give null (its arguments may be placeholders)."""
        before, self.lenient = self.lenient, True
        try:
            yield
        finally:
            self.lenient = before

    def tolerates(self, error: TemplateError) -> bool:
        return self.lenient and not isinstance(error, BudgetError)


class Meter:
    """What one function call has built so far, checked against the per-call cap and the total."""

    def __init__(self, budget: Budget, path: str, name: str) -> None:
        self.budget, self.path, self.name, self.used = budget, path, name, 0

    def check(self, size: int) -> None:
        """BudgetError if building *size* more bytes would break a cap (nothing is counted)."""
        if self.used + size > MAX_CALL_BYTES:
            raise BudgetError(
                self.path, f"{self.name}: the result would exceed the cap of {MAX_CALL_BYTES} bytes per call"
            )
        self.budget.check(size, self.path, self.name)

    def add(self, size: int) -> None:
        """Count *size* bytes about to be built; BudgetError (before they are) past a cap."""
        self.check(size)
        self.used += size
        self.budget.spend(size, self.path, self.name)


_CURRENT: ContextVar[Budget | None] = ContextVar("anneal_hot_budget", default=None)


def current() -> Budget:
    """The budget of the evaluation in progress; without one, a fresh one with no total."""
    return _CURRENT.get() or Budget(None)


def meter(path: str, name: str) -> Meter:
    """A meter for the call of *name* at *path*, charging the current budget."""
    return Meter(current(), path, name)


@contextlib.contextmanager
def evaluating(budget: Budget) -> Iterator[Budget]:
    """Make *budget* the current one for the evaluation inside the block."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)
