"""The CLI's pure parts: table fitting, DOT quoting, --since parsing, progress arithmetic, committed completions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control.cli import completion, events, graph, output, report
from control.cli.client import ClientError

ROOT = Path(__file__).resolve().parents[2]


def test_a_table_fits_the_width_given_and_marks_cut_text() -> None:
    """A table wider than its width narrows its widest columns and ends cut text with '…'."""
    text = output.table([{"a": "x" * 100, "b": "short", "c": "y" * 30}], ["a", "b", "c"], width=60)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 60
    assert "x…" in text and "y…" in text and "short" in text


def test_a_table_that_fits_is_not_cut() -> None:
    """Text within its column's width is shown whole, with no '…'."""
    text = output.table([{"a": "abc", "b": "defgh"}], ["a", "b"], width=200)
    assert "…" not in text and "abc" in text and "defgh" in text


def test_columns_are_never_cut_below_their_floor() -> None:
    """On a very narrow width columns stop at MIN_COLUMN characters rather than vanish."""
    text = output.table([{"a": "x" * 50, "b": "y" * 50}], ["a", "b"], width=10)
    row = text.splitlines()[3]
    assert row.count("x") == output.MIN_COLUMN - 1 and row.count("…") == 2


def test_times_become_iso_8601_in_utc() -> None:
    """Epoch seconds under time keys become ISO 8601 UTC; other numbers stay as they are."""
    data = output.readable_times({"created_at": 0.5, "version": 3, "x": [{"timestamp": 1.0}]}, precise=True)
    assert data == {
        "created_at": "1970-01-01T00:00:00.500Z",
        "version": 3,
        "x": [{"timestamp": "1970-01-01T00:00:01.000Z"}],
    }
    assert output.iso(86400.0) == "1970-01-02T00:00:00Z"


@given(st.text())
def test_dot_quoting_round_trips_any_text(text: str) -> None:
    """A DOT quoted string holds no bare double quote or line break, whatever the name."""
    quoted = graph.quote(text)
    inner = quoted[1:-1]
    assert quoted[0] == quoted[-1] == '"' and "\n" not in inner and "\r" not in inner
    assert inner.replace("\\\\", "").replace('\\"', "").count('"') == 0


def test_dot_marks_old_resources_and_labels_edges() -> None:
    """Replaced resources are dashed nodes of their own; edges carry their kinds."""
    text = graph.dot(
        {
            "stack": 'we"ird',
            "nodes": [
                {"name": "a", "type": "T", "status": "CREATE_COMPLETE", "current": True},
                {"name": "a", "type": "T", "status": "DELETE_IN_PROGRESS", "current": False},
            ],
            "edges": [{"from": "a", "to": "b", "kinds": ["depends_on", "get_attr"]}],
        }
    )
    assert text.startswith('digraph "we\\"ird" {')
    assert '"a (old)"' in text and "dashed" in text and 'fillcolor="palegreen"' in text
    assert '"a" -> "b" [label="depends_on, get_attr"];' in text


def test_since_takes_iso_times_and_ages() -> None:
    """--since takes ISO 8601 (UTC unless zoned) or an age in s, m, h or d; anything else is a clear error."""
    assert events.since("1970-01-01T00:01:00Z") == 60.0
    assert events.since("1970-01-01T00:01:00") == 60.0
    assert events.since("1970-01-01T01:01:00+01:00") == 60.0
    assert events.since("10m", now=1000.0) == 400.0
    assert events.since("1d", now=100000.0) == 100000.0 - 86400
    with pytest.raises(ClientError, match="--since"):
        events.since("yesterday")


def test_progress_counts_rate_and_eta() -> None:
    """Progress takes the server's counts; a delete counts what is gone as done; the ETA follows the rate."""
    p = report.Progress(total=10, started=time.monotonic() - 2.0)
    assert p.update({"resources": 10, "done": 4, "failed": 1, "in_progress": 2}, deleting=False)
    assert not p.update({"resources": 10, "done": 4, "failed": 1, "in_progress": 2}, deleting=False)
    d = p.as_dict()
    assert (d["done"], d["total"], d["failed"], d["in_progress"]) == (4, 10, 1, 2)
    assert 2.0 < d["rate"] <= 2.5 and d["eta_seconds"] is not None and 1.5 < d["eta_seconds"] < 2.6
    gone = report.Progress(total=6)
    gone.update({"resources": 2, "done": 0, "failed": 0, "in_progress": 1}, deleting=True)
    assert gone.done == 4
    assert "4/6 done, 0 failed, 1 running" in gone.line()


def test_committed_agent_completions_are_current(tmp_path: Path) -> None:
    """packaging/completion holds what `python -m control.cli.completion` makes from today's agent parser."""
    for made in completion.write_agent_scripts(tmp_path):
        committed = ROOT / "packaging" / "completion" / made.relative_to(tmp_path)
        assert committed.read_text() == made.read_text(), (
            f"regenerate: python -m control.cli.completion ({committed})"
        )
