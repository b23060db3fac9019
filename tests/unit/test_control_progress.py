"""Progress signals on the control plane: recorded only, with the stale and duplicate rules."""

from __future__ import annotations

import io
from typing import Any

import pytest

from agent import wire
from control.cli import log
from control.errors import BadRequestError, StaleSignalError
from control.signals.progress import apply_progress, is_progress
from control.signals.result import DUPLICATE, apply_signal
from control.store.orm import DeploymentRow


def body(seq: int, tail: str = "out", size: int = 3) -> dict[str, Any]:
    return {
        "deploy_stdout": tail,
        "anneal": {
            "status": "IN_PROGRESS",
            "seq": seq,
            "output_tail": tail,
            "output_bytes": size,
            "elapsed": 1.5,
        },
    }


def running(generation: int = 2) -> DeploymentRow:
    return DeploymentRow(id="dep1", generation=generation, status="IN_PROGRESS", progress=None)


def test_progress_is_recorded_without_changing_the_deployment():
    """A progress signal is kept as the last progress; status and result stay as they were."""
    dep = running()
    kept = apply_progress(dep, 2, body(1))
    assert kept is not None
    assert (kept["seq"], kept["output_tail"], kept["generation"]) == (1, "out", 2)
    assert (dep.status, dep.progress) == ("IN_PROGRESS", None)  # stored by a plain UPDATE, not here


def test_repeated_or_older_progress_is_a_duplicate():
    """The same or a lower seq of the same generation is answered as a duplicate and dropped."""
    dep = running()
    dep.progress = apply_progress(dep, 2, body(5, "five"))
    assert apply_progress(dep, 2, body(5, "again")) is None
    assert apply_progress(dep, 2, body(4, "older")) is None
    newer = apply_progress(dep, 2, body(6, "newer"))
    assert newer is not None and newer["output_tail"] == "newer"


def test_progress_after_the_result_is_dropped():
    """Once the deployment has its result, a late progress signal changes nothing."""
    dep = running()
    dep.status = "COMPLETE"
    assert apply_progress(dep, 2, body(1)) is None


@pytest.mark.parametrize("generation", [1, 3])
def test_progress_for_another_generation_is_stale(generation):
    """An older or unknown generation is refused as stale, as a result would be."""
    with pytest.raises(StaleSignalError):
        apply_progress(running(2), generation, body(1))


@pytest.mark.parametrize(
    ("field", "value"),
    [("seq", 0), ("seq", "1"), ("output_tail", 5), ("output_bytes", -1), ("elapsed", None)],
)
def test_bad_progress_fields_are_named(field, value):
    """A malformed progress signal is a 400 naming the field."""
    bad = body(1)
    bad["anneal"][field] = value
    with pytest.raises(BadRequestError, match=field):
        apply_progress(running(), 2, bad)


def test_only_marked_bodies_are_progress():
    """Only anneal.status IN_PROGRESS makes a progress signal; a result is never one."""
    assert is_progress(body(1))
    assert not is_progress({"deploy_status_code": 0, "anneal": {"nonce": "x"}})
    assert not is_progress(["not", "a", "map"])


def test_log_prints_only_what_is_new_and_says_what_it_missed():
    """The byte count is the cursor: new output is printed once; a gap bigger than the tail is named."""
    out = io.StringIO()
    cursor = log.print_new({"generation": 1, "output_tail": "ab", "output_bytes": 2}, (None, 0), out)
    cursor = log.print_new({"generation": 1, "output_tail": "abcd", "output_bytes": 4}, cursor, out)
    cursor = log.print_new({"generation": 1, "output_tail": "abcd", "output_bytes": 4}, cursor, out)
    cursor = log.print_new({"generation": 1, "output_tail": "yz", "output_bytes": 10}, cursor, out)
    assert out.getvalue() == "abcd[... 4 bytes not shown ...]\nyz"
    assert cursor == (1, 10)


def test_a_progress_body_read_as_a_result_never_completes_the_deployment():
    """Whatever path hands a progress body to apply_signal (it has no status code), nothing changes."""
    dep = running()
    assert DUPLICATE == apply_signal(dep, 2, wire.decode_signal(body(1)))
    assert dep.status == "IN_PROGRESS"


def test_progress_claiming_another_generation_is_refused():
    """anneal.generation in the body must match the URL's generation."""
    bad = body(1)
    bad["anneal"]["generation"] = 1
    with pytest.raises(BadRequestError, match="generation"):
        apply_progress(running(2), 2, bad)
