"""What the control plane refuses in a request before anything else reads it, and repeated log lines."""

from __future__ import annotations

import json
import logging

import pytest

from agent import wire
from agent.loglimit import RepeatFilter
from control.api.body import MAX_BODY_DEPTH, parse_json
from control.errors import BadRequestError
from control.signals.result import bad_status_code


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"parameters": {"p": "\\ud800"}}', "body.parameters.p"),
        (b'{"files": {"a.sh": "ok \\udfff"}}', "body.files.a.sh"),
        (b'{"name": "x\\ud800y"}', "body.name"),
        (b'{"parameters": {"\\ud800": 1}}', "body.parameters (a key)"),
        (b'{"list": [1, ["\\ud83d"]]}', "body.list[1][0]"),
        (b"[" * (MAX_BODY_DEPTH + 1) + b"]" * (MAX_BODY_DEPTH + 1), "body"),
        (b"[" * 100_000 + b"]" * 100_000, "body"),
        (b'{"n": NaN}', "body"),
        (b'{"n": 1e999}', "body"),
        (b'{"a": "\xff"}', "body"),
    ],
)
def test_body_refuses_what_no_handler_could_store_naming_the_path(raw: bytes, where: str) -> None:
    """Lone surrogates, deep nesting, NaN and infinity, bad UTF-8: 400 naming the path."""
    with pytest.raises(BadRequestError) as caught:
        parse_json(raw)
    assert where == caught.value.where


def test_body_keeps_valid_text_nesting_and_numbers():
    """Pairs of surrogates (an emoji), nesting up to the cap and big integers pass unchanged."""
    value = {
        "emoji": "\U0001f600",
        "deep": json.loads("[" * (MAX_BODY_DEPTH - 2) + "]" * (MAX_BODY_DEPTH - 2)),
    }
    value["big"] = 2**70
    assert value == parse_json(json.dumps(value).encode())


@pytest.mark.parametrize(
    ("code", "bad"), [(0, False), (255, False), (-(2**31), False), (2**31, True), (2**70, True)]
)
def test_deploy_status_code_must_fit_the_database(code: int, bad: bool) -> None:
    """deploy_status_code past the 32-bit column is named as out of range (the signal gets 400)."""
    signal = wire.decode_signal({"deploy_status_code": code})
    reason = bad_status_code(signal)
    assert bad == (reason is not None)
    if bad:
        assert "deploy_status_code" in str(reason) and "out of range" in str(reason)


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("x", logging.ERROR, __file__, 1, msg, args, None)


def test_repeated_log_lines_are_counted_not_written():
    """The first copy of a line passes; copies within the window are dropped and counted on the next one."""
    now = [0.0]
    repeat = RepeatFilter(window=10.0, clock=lambda: now[0])
    assert repeat.filter(_record("accept failed: %s", "EMFILE"))
    assert not any(repeat.filter(_record("accept failed: %s", "EMFILE")) for _ in range(999))
    assert repeat.filter(_record("another line"))
    now[0] = 10.5
    later = _record("accept failed: %s", "EMFILE")
    assert repeat.filter(later)
    assert "accept failed: EMFILE (and 999 more like it in the 10 s before)" == later.getMessage()


def test_exempt_loggers_pass_every_line():
    """The access log is exempt: each request is a line of its own."""
    repeat = RepeatFilter(exempt=["control.access"])
    record = logging.LogRecord("control.access", logging.INFO, __file__, 1, "GET /v1/health", None, None)
    assert all(repeat.filter(record) for _ in range(5))


def test_an_integral_float_status_code_is_that_integer():
    """deploy_status_code 3.0 is 3 (JSON has one number type); 2.5 is refused naming the field."""
    assert 3 == wire.decode_signal({"deploy_status_code": 3.0}).status_code
    with pytest.raises(wire.WireError, match="deploy_status_code"):
        wire.decode_signal({"deploy_status_code": 2.5})


def test_a_key_given_twice_in_a_body_is_refused_naming_it():
    """{"name": "a", "name": "b"} is refused (which one was meant?), naming the key."""
    with pytest.raises(BadRequestError, match="'name' appears twice"):
        parse_json(b'{"name": "a", "template": {"resources": {}}, "name": "b"}')
