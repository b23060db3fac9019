"""A progress signal's retry note: checked field by field, and the status reason it gives."""

from __future__ import annotations

from typing import Any

import pytest

from control.errors import BadRequestError
from control.resources.changes import with_stack_defaults
from control.signals.progress import decode, retry_reason


def body(retry: Any) -> dict[str, Any]:
    extra = {"status": "IN_PROGRESS", "seq": 1, "output_tail": "", "output_bytes": 0, "elapsed": 1.0}
    return {"anneal": {**extra, "retry": retry}}


def test_a_pending_and_a_running_retry_give_their_reasons() -> None:
    """Pending: when and after what; running: which retry."""
    assert retry_reason(decode(body({"retry": 2, "of": 3, "in": 4, "after": "exit 1"}))) == (
        "retry 2 of 3 in 4 s after exit 1"
    )
    assert retry_reason(decode(body({"retry": 2, "of": 3}))) == "retry 2 of 3 running"
    assert retry_reason({"seq": 1}) is None


@pytest.mark.parametrize(
    ("note", "where"),
    [
        ("soon", "anneal.retry"),
        ({"retry": "2", "of": 3}, "anneal.retry"),
        ({"retry": 1, "of": 3, "in": -1, "after": "exit 1"}, "anneal.retry.in"),
        ({"retry": 1, "of": 3, "in": 1, "after": "x" * 65}, "anneal.retry.after"),
    ],
)
def test_a_bad_retry_note_is_refused_naming_the_field(note: Any, where: str) -> None:
    """A malformed note is a 400 at its field, never stored."""
    with pytest.raises(BadRequestError) as info:
        decode(body(note))
    assert info.value.where == where


def test_the_stack_default_fills_only_an_unset_retry() -> None:
    """A deployment's own retry (even retries 0) wins; types without a retry property get nothing."""
    default = {"retry": {"retries": 2}}
    dep = "OS::Heat::SoftwareDeployment"
    assert with_stack_defaults(dep, {"server": "s"}, default) == {"server": "s", "retry": {"retries": 2}}
    assert with_stack_defaults(dep, {"retry": {"retries": 0}}, default) == {"retry": {"retries": 0}}
    assert with_stack_defaults("OS::Heat::Value", {"value": 1}, default) == {"value": 1}
