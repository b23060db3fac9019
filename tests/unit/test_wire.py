"""The wire schema: Heat's document shape, our extras, signals, hashes."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import wire, wire_caps
from control.documents import hashing
from control.documents.render import iso

HEAT_ITEM: dict[str, Any] = {
    "id": "3d5ec2a8-7004-43b6-a7f6-542bdbe9d434",
    "name": "10_write_file",
    "group": "script",
    "creation_time": "2026-05-01T10:00:02Z",
    "options": None,
    "config": "#!/bin/sh\necho hi\n",
    "outputs": [{"name": "result", "type": "String", "error_output": False}],
    "inputs": [
        {"name": "foo", "type": "String", "value": "fooooo"},
        {"name": "bar", "type": "String", "default": "out.txt", "value": "b", "replace_on_change": True},
        {"name": "deploy_signal_id", "type": "String", "value": "http://x/signal?sig=1"},
    ],
}


def item(**changes: object) -> wire.DeploymentItem:
    return wire.decode_item({**HEAT_ITEM, **changes})


def test_heat_document_without_extras_is_accepted():
    """A document exactly as Heat writes it (no `anneal` key) decodes with serial 0."""
    doc = wire.decode_document(json.dumps({"deployments": [HEAT_ITEM], "os-collect-config": {}}).encode())
    assert 0 == doc.serial
    assert ["10_write_file"] == [d.name for d in doc.deployments]
    assert {"os-collect-config": {}} == dict(doc.extra)


def test_document_round_trip_keeps_heat_shape_and_sorts_by_name():
    """Encoding sorts deployments by name and keeps Heat's item keys; extras go under `anneal`."""
    a, b = item(id="a", name="20_b"), item(id="b", name="10_a")
    meta = {"a": wire.ItemMeta("dep-a", 2, "sha256:x", "UPDATE", 30.0)}
    doc = wire.Document("srv", 7, "2026-01-01T00:00:00Z", (a, b), meta, {"os-collect-config": {"k": 1}})
    obj = json.loads(doc.encode())
    assert ["10_a", "20_b"] == [d["name"] for d in obj["deployments"]]
    assert {"id", "name", "group", "creation_time", "config", "inputs", "outputs", "options"} == set(
        obj["deployments"][0]
    )
    assert 7 == obj["anneal"]["serial"]
    again = wire.decode_document(doc.encode())
    assert doc.serial == again.serial
    assert dict(doc.meta) == dict(again.meta)
    assert sorted(d.id for d in doc.deployments) == sorted(d.id for d in again.deployments)


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d["deployments"][0].pop("id"), "deployments[0].id: required"),
        (lambda d: d["deployments"][0]["inputs"].append({"value": 1}), "deployments[0].inputs[3].name"),
        (lambda d: d.update(deployments="x"), "document.deployments: expected list"),
        (lambda d: d["anneal"].update(serial="7"), "anneal.serial: expected int"),
    ],
)
def test_malformed_document_names_the_path(mutate, where):
    """Every schema error says where it is."""
    doc = {
        "deployments": [json.loads(json.dumps(HEAT_ITEM))],
        "anneal": {"server_id": "s", "serial": 1, "deployments": {}},
    }
    mutate(doc)
    with pytest.raises(wire.WireError, match=where.replace("[", r"\[").replace("]", r"\]")):
        wire.decode_document(json.dumps(doc).encode())


def test_document_over_cap_is_refused():
    """A document over MAX_DOCUMENT_BYTES is refused before parsing."""
    with pytest.raises(wire.WireError, match="over the cap"):
        wire.decode_document(b" " * (wire_caps.MAX_DOCUMENT_BYTES + 1))


def test_duplicate_item_ids_are_refused():
    """Two items with one id would make run-once ambiguous."""
    with pytest.raises(wire.WireError, match="appears twice"):
        wire.decode_document({"deployments": [HEAT_ITEM, HEAT_ITEM]})


def test_signal_heat_flat_form():
    """Keys other than deploy_* are outputs; a string status code is accepted."""
    sig = wire.decode_signal(
        {
            "deploy_stdout": "o",
            "deploy_stderr": "e",
            "deploy_status_code": "3",
            "result": "r",
            "anneal": {"nonce": "n"},
        }
    )
    assert (3, "o", "e", {"result": "r"}, {"nonce": "n"}) == (
        sig.status_code,
        sig.stdout,
        sig.stderr,
        dict(sig.outputs),
        dict(sig.extra),
    )


@pytest.mark.parametrize("code", [True, 1.5, [], "x"])
def test_signal_bad_status_code(code):
    """A status code that is not an integer is refused, naming the key."""
    with pytest.raises(wire.WireError, match="deploy_status_code"):
        wire.decode_signal({"deploy_status_code": code})


def test_hash_ignores_ids_times_and_credentials():
    """The idempotency hash is about what is applied, not about ids or signal URLs."""
    a = item(id="one", creation_time="t1")
    b = item(
        id="two",
        creation_time="t2",
        inputs=[*HEAT_ITEM["inputs"][:2], {"name": "deploy_signal_id", "value": "other"}],
    )
    assert hashing.idempotency_hash(a, "CREATE") == hashing.idempotency_hash(b, "CREATE")
    assert hashing.idempotency_hash(a, "CREATE") != hashing.idempotency_hash(a, "UPDATE")
    c = item(inputs=[{"name": "foo", "value": "changed"}])
    assert hashing.idempotency_hash(a, "CREATE") != hashing.idempotency_hash(c, "CREATE")


@given(st.text())
def test_trim_stream_keeps_short_text(text):
    """Text within the cap is returned unchanged."""
    assert text == wire_caps.trim_stream(text, cap=10**6)


@given(st.text(min_size=1), st.integers(min_value=16, max_value=200))
def test_trim_stream_bounds_size(text, cap):
    """Trimmed text keeps head and tail and stays near the cap."""
    out = wire_caps.trim_stream(text * 50, cap)
    assert len(out.encode()) <= cap + 64


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3),
        max_leaves=10,
    )
)
def test_decode_document_only_raises_wire_error(value):
    """Any JSON value either decodes or raises WireError."""
    with contextlib.suppress(wire.WireError):
        wire.decode_document(json.dumps(value).encode())


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("result", True),
        ("a.b-c_1", True),
        ("../x", False),
        ("a/b", False),
        ("", False),
        (".hidden", False),
        ("x" * 300, False),
        ("a..b", False),
    ],
)
def test_safe_output_name(name, ok):
    """Output names become file names only when they cannot escape their directory."""
    assert ok == wire.safe_output_name(name)


@given(
    st.integers(min_value=-(10**9), max_value=2**32),
    st.sampled_from([0.0, 0.25, 0.9999994, 0.9999995, 0.99999951, 0.999999]),
)
def test_a_timestamp_reads_as_datetime_formats_it(second: int, fraction: float) -> None:
    """``iso`` (formatted once per second) gives what datetime gives, where rounding to microseconds carries too."""
    ts = second + fraction
    assert iso(ts) == datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
