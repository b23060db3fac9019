"""A Secret that reaches an API answer shows masked: /v1's ``ok()`` and Heat's API share one helper."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from control.api.heat_v1.middleware import json_response
from control.api.middleware import ok
from control.hot.taint import MASK, Secret, dumps_masked

CANARY = "cnry-answer-7f3a"
#: Secrets where handlers put values: a member, a list item, a map key, a whole map.
ANSWER = {
    "stack": {"outputs": [{"output_value": Secret(CANARY)}, {"output_value": "plain"}]},
    "keyed": {Secret(CANARY): 1},
    "whole": Secret({"password": CANARY}),
}
EXPECTED = {
    "stack": {"outputs": [{"output_value": MASK}, {"output_value": "plain"}]},
    "keyed": MASK,
    "whole": MASK,
}


def _body(response: web.Response) -> str:
    assert isinstance(response.body, bytes)
    return response.body.decode()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(lambda data: _body(ok(data)), id="v1-ok"),
        pytest.param(lambda data: _body(json_response(data)), id="heat-v1-json_response"),
        pytest.param(dumps_masked, id="dumps_masked"),
    ],
)
def test_a_secret_in_an_answer_is_masked_never_shown(answer: Callable[[Any], str]) -> None:
    """Members, map keys and whole values that are Secrets show as the mask, plain values as they are."""
    text = answer(ANSWER)
    assert CANARY not in text
    assert EXPECTED == json.loads(text)


def test_heats_answers_keep_their_content_type_and_status() -> None:
    """Heat's API answers stay `application/json` without a charset, with their status."""
    response = json_response({"a": Secret("x")}, status=201)
    assert (201, "application/json") == (response.status, response.headers["Content-Type"])


def test_a_value_json_cannot_encode_is_still_an_error() -> None:
    """Masking does not hide a handler's bug: an object that is not JSON data is refused."""
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_masked({"a": object()})
