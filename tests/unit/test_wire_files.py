"""Binary get_file content crosses JSON in its envelope and comes back as the same bytes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agent import wire_files


@given(st.binary(max_size=4096))
def test_any_bytes_survive_json_in_their_envelope(data: bytes) -> None:
    """carried() then JSON then opened() gives the bytes back; UTF-8 text is carried as text."""
    value = json.loads(json.dumps(wire_files.carried(data)))
    if isinstance(value, str):
        assert value.encode("utf-8") == data
    else:
        assert wire_files.opened(value) == data


def test_only_a_well_formed_envelope_opens() -> None:
    """A map with other keys, a non-string or non-base64 payload, or plain text is not an envelope."""
    key = wire_files.BINARY_KEY
    for value in ("text", {key: 1}, {key: "!!"}, {key: "AA==", "x": 1}, None, [key]):
        assert wire_files.opened(value) is None
    assert wire_files.opened({key: "AAH/"}) == b"\x00\x01\xff"
