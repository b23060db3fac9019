"""bench/hop_trace.py cuts a hop at its milestones, each the first stamp after the one before."""

from __future__ import annotations

import pytest

from bench.hop_trace import MILESTONES, hop_intervals


def test_each_interval_ends_at_the_first_stamp_after_the_previous_milestone() -> None:
    events = [e for e, _ in MILESTONES]
    stamps = [(100.0 + 0.001 * (n + 1), e) for n, e in enumerate(events)]
    # A stamp of the same name before the hop (the previous one's) and one after its milestone are passed over.
    stamps += [(99.0, "commit>"), (100.0 + 0.001 * (len(events) + 0.5), "render<")]
    got = hop_intervals(100.0, 100.0 + 0.001 * (len(events) + 2), sorted(stamps))
    assert got is not None
    assert [pytest.approx(1.0)] * len(events) + [pytest.approx(2.0)] == got


def test_a_hop_missing_a_milestone_is_left_out() -> None:
    stamps = [(100.0 + 0.001 * (n + 1), e) for n, (e, _) in enumerate(MILESTONES) if e != "tool<"]
    assert hop_intervals(100.0, 101.0, stamps) is None
