"""Secrecy follows values through every HOT function (control/hot/taint.py, control/hot/evaluation.py).

A stack context whose hidden parameters are Secrets, as the engine's StackContext
gives them; each derivation must come out a Secret, and what the API would show
(``taint.masked``) must hold no part of the canary.
"""

from __future__ import annotations

import collections
import json
import types
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import wire
from control import hot
from control.documents import seal
from control.engine.stackdef import plain
from control.hot import TemplateError, resolve, taint
from control.hot.evaluation import select
from control.hot.taint import Secret
from control.resources import secrecy
from control.signals.result import APPLIED, apply_signal
from control.store.orm import DeploymentRow

CANARY = "cnry-aaaa:cnry-bbbb"
PARTS = ("cnry-aaaa", "cnry-bbbb")
QUOTED = 'cnry-q"uote'


class Stack:
    """Parameters as the engine gives them: hidden ones wrapped in Secret."""

    def __init__(self, attributes: Mapping[tuple[str, str], Any] | None = None) -> None:
        self.params: dict[str, Any] = {
            "pw": Secret(CANARY),
            "creds": Secret({"user": "admin", "password": PARTS[1]}),
            "quoted": Secret(QUOTED),
            "names": Secret(["cnry-k1", "cnry-k2"]),
            "port": 5432,
            "host": "db.example",
        }
        self.attributes = dict(attributes or {})

    def param(self, name: str) -> Any:
        return self.params[name]

    def resource_id(self, name: str) -> Any:
        return f"id-{name}"

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        return select(self.attributes.get((name, attribute)), path)

    def facade(self, key: str) -> Any:
        return None

    def file(self, path: str) -> str:
        return "file text"

    def condition(self, name: str) -> bool:
        return True


PW = {"get_param": "pw"}
DERIVATIONS: dict[str, Any] = {
    "whole": PW,
    "json member": {"get_param": ["creds", "password"]},
    "str_split part": {"str_split": [":", PW, 1]},
    "str_split list": {"str_split": [":", PW]},
    "quote in a map": {"map_merge": [{"a": {"get_param": "quoted"}}, {"b": 1}]},
    "map key (map_replace)": {"map_replace": [{"k": 1}, {"keys": {"k": PW}}]},
    "map key (repeat)": {"repeat": {"for_each": {"<%k%>": {"get_param": "names"}}, "template": {"<%k%>": 1}}},
    "str_replace": {"str_replace": {"template": "pw=$P", "params": {"$P": PW}}},
    "str_replace_strict": {"str_replace_strict": {"template": "pw=$P", "params": {"$P": PW}}},
    "list_join": {"list_join": [",", ["a", PW]]},
    "repeat": {"repeat": {"for_each": {"%x%": [PW]}, "template": "v=%x%"}},
    "map_merge": {"map_merge": [{"p": PW}, {"h": {"get_param": "host"}}]},
    "list_concat": {"list_concat": [[PW], ["x"]]},
    "filter": {"filter": [["x"], [PW, "x"]]},
    "make_url": {"make_url": {"scheme": "https", "host": "h", "password": PW, "username": "u"}},
    "digest": {"digest": ["sha256", PW]},
    "equals": {"equals": [PW, "guess"]},
    "contains": {"contains": ["cnry", PW]},
    "if on a secret condition": {"if": [{"equals": [PW, CANARY]}, "yes", "no"]},
    "if branch": {"if": [True, PW, "no"]},
    "nested": {
        "list_join": ["-", {"str_split": [":", {"str_replace": {"template": "X", "params": {"X": PW}}}]}]
    },
    "get_attr of a secret attribute": {"get_attr": ["val", "value", "password"]},
}


def _shown(value: Any) -> str:
    return json.dumps(taint.masked(value))


@pytest.mark.parametrize("name", sorted(DERIVATIONS))
def test_every_derivation_of_a_secret_is_a_secret(name: str) -> None:
    """Each function given a secret returns a Secret, and what would be shown holds no part of it."""
    ctx = Stack({("val", "value"): Secret({"password": PARTS[0]})})
    value = resolve(DERIVATIONS[name], ctx, "outputs.x")
    assert taint.tainted(value), name
    shown = _shown(value)
    for part in (CANARY, *PARTS, "cnry-k1", QUOTED, json.dumps(QUOTED)[1:-1]):
        assert part not in shown


def test_secrets_reach_the_hook_as_computed() -> None:
    """Revealed, a derivation is exactly what the function computes on the plain value."""
    ctx = Stack()
    assert "cnry-bbbb" == taint.reveal(resolve({"str_split": [":", PW, 1]}, ctx))
    assert {"a": QUOTED, "b": 1} == taint.reveal(resolve(DERIVATIONS["quote in a map"], ctx))
    assert {CANARY: 1} == taint.reveal(resolve(DERIVATIONS["map key (map_replace)"], ctx))


def test_plain_values_stay_plain() -> None:
    """Nothing secret in, nothing secret out: the same functions on plain parameters are not tainted."""
    ctx = Stack()
    for expr in (
        {"str_replace": {"template": "h=$H", "params": {"$H": {"get_param": "host"}}}},
        {"map_merge": [{"h": {"get_param": "host"}}, {"p": {"get_param": "port"}}]},
        {"if": [{"equals": [{"get_param": "port"}, 5432]}, "a", "b"]},
    ):
        assert not taint.tainted(resolve(expr, ctx))


def test_a_literal_map_keeps_its_plain_members_visible() -> None:
    """Only the member taken from a secret is masked in a map written in the template."""
    value = resolve({"user": {"get_param": ["creds", "user"]}, "host": {"get_param": "host"}}, Stack())
    assert {"user": taint.MASK, "host": "db.example"} == taint.masked(value)


def test_an_error_about_a_secret_never_quotes_it() -> None:
    """A function that fails on a secret argument names the problem, not the value."""
    with pytest.raises(TemplateError) as e:
        resolve({"str_split": [":", PW, 7]}, Stack(), "outputs.x")
    assert CANARY not in str(e.value) and "str_split" in str(e.value)
    with pytest.raises(TemplateError) as e:
        resolve({"map_merge": [PW]}, Stack(), "outputs.x")
    assert CANARY not in str(e.value) and "map_merge" in str(e.value)


def test_an_error_cutting_a_derived_secret_short_quotes_no_part_of_it() -> None:
    """An error that would show a long derived secret cut short (no whole text to mask) shows none of it."""
    doubled = {"str_replace": {"template": "T-U", "params": {"T": PW, "U": PW}}}
    keyed = {"repeat": {"for_each": {"%v%": [doubled]}, "template": {"k%v%": "%v%"}}}
    with pytest.raises(TemplateError) as e:
        resolve({"str_split": [":", keyed, 0]}, Stack(), "outputs.x")
    assert all(p not in str(e.value) for p in (CANARY, *PARTS)) and "str_split" in str(e.value)


def test_a_secret_survives_storage_as_json() -> None:
    """The engine's stored form of resolved properties (and the encrypted columns') keeps Secrets."""
    props = {"input_values": {"PW": Secret(CANARY), "HOST": "db"}, "list": [Secret({"k": 1})]}
    assert props == plain(props)
    assert props == taint.loads(json.dumps(props, default=taint.json_default))
    assert str(Secret(CANARY)) == taint.MASK and CANARY not in repr(props)


def test_secret_texts_cover_parts_and_json_escapes() -> None:
    """What a hook writes back is searched for each string of a secret, also as JSON escapes it."""
    found = taint.texts(Secret({"a": QUOTED, "n": [123456, "ab"]}))
    assert {QUOTED, json.dumps(QUOTED)[1:-1], "123456"} <= found
    assert "ab" not in found  # too short: it would match everywhere
    assert f"x{taint.MASK}y" == taint.mask_text(f"x{QUOTED}y", found)


def test_a_secret_where_a_handler_reads_plain_values_is_refused() -> None:
    """A deployment's server from a hidden parameter is refused naming the property; input values carry it."""
    props = {"server": Secret("srv"), "input_values": {"PW": Secret(CANARY)}}
    with pytest.raises(Exception, match=r"resources\.d\.properties\.server: a value derived"):
        secrecy.check_carriers("OS::Heat::SoftwareDeployment", props, "resources.d.properties")
    secrecy.check_carriers("OS::Heat::SoftwareDeployment", {"input_values": props["input_values"]}, "r")
    secrecy.check_carriers("OS::Nova::Server", {"admin_pass": Secret("x"), "name": "s"}, "r")


EXPRESSIONS = st.recursive(
    st.sampled_from([PW, {"get_param": "creds"}, {"get_param": "host"}, "lit:eral", 7]),
    lambda inner: st.one_of(
        st.builds(
            lambda a, b: {"str_replace": {"template": "T-U", "params": {"T": a, "U": b}}}, inner, inner
        ),
        st.builds(lambda a, b: {"list_join": [":", [a, b]]}, inner, inner),
        st.builds(lambda a: {"str_split": [":", a, 0]}, inner),
        st.builds(lambda a, b: {"map_merge": [{"x": a}, {"y": b}]}, inner, inner),
        st.builds(lambda a: {"digest": ["md5", a]}, inner),
        st.builds(lambda a, b: {"list_concat": [[a], [b]]}, inner, inner),
        st.builds(lambda a, b: {"if": [{"equals": [a, b]}, a, b]}, inner, inner),
        st.builds(lambda a: {"repeat": {"for_each": {"%v%": [a]}, "template": {"k%v%": "%v%"}}}, inner),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_no_composition_of_functions_shows_a_secret(expr: Any) -> None:
    """Property: whatever functions are composed over a secret, what would be shown holds no part of it."""
    try:
        value = resolve(expr, Stack(), "outputs.x")
    except TemplateError as e:
        assert all(p not in str(e) for p in (CANARY, *PARTS))
        return
    shown = _shown(value)
    assert all(p not in shown for p in (CANARY, *PARTS))


def test_a_hook_writing_back_a_secret_is_kept_secret_and_never_quoted() -> None:
    """An output or stream holding a secret input's value is a Secret; the error_output reason masks it."""
    dep = DeploymentRow(
        id="d",
        status="IN_PROGRESS",
        generation=1,
        item={
            "inputs": [
                {"name": "PW", "value": "hunter2-long", "secret": True},
                {"name": "HOST", "value": "db"},
            ],
            "outputs": [
                {"name": "err", "error_output": True},
                {"name": "host"},
                {"name": "made", "secret": True},
            ],
        },
    )
    body = {"deploy_status_code": 0, "deploy_stdout": "pw hunter2-long", "err": "bad hunter2-long"}
    signal = wire.decode_signal({**body, "host": "db", "made": "fresh-token"})
    assert APPLIED == apply_signal(dep, 1, signal, seal.texts_for(dep.item))
    assert ("FAILED", "err : bad ******") == (dep.status, dep.status_reason)
    assert {"err": Secret("bad hunter2-long"), "host": "db", "made": Secret("fresh-token")} == dep.outputs
    assert Secret("pw hunter2-long") == dep.stdout and "" == dep.stderr


def test_each_retried_attempt_holding_a_secret_is_kept_secret_and_its_reason_masks_it() -> None:
    """A retried deployment's attempts keep a stream holding a secret as a Secret; the reason quotes it masked."""
    dep = DeploymentRow(
        id="d",
        status="IN_PROGRESS",
        generation=1,
        item={"inputs": [{"name": "PW", "value": "hunter2-long", "secret": True}], "outputs": []},
    )
    attempts = [
        {"attempt": n, "status_code": 3, "stdout": f"run {n}", "stderr": f"refused\nno hunter2-long {n}\n"}
        for n in (1, 2)
    ]
    signal = wire.Signal(3, "run 2", "no hunter2-long 2", {}, {"attempts": attempts})
    assert APPLIED == apply_signal(dep, 1, signal, seal.texts_for(dep.item))
    assert "hunter2" not in dep.status_reason
    assert dep.status_reason.endswith("attempt 2: status code 3: no ****** 2"), dep.status_reason
    assert ["run 1", "run 2"] == [a["stdout"] for a in dep.attempts]
    assert [Secret(a["stderr"]) for a in attempts] == [a["stderr"] for a in dep.attempts]


def test_a_secret_given_to_a_nested_stack_is_checked_as_plain_data_and_stays_hidden() -> None:
    """A parent's hidden value as a nested stack's parameter converts to its type, is hidden, and no error shows it."""
    child = {
        "heat_template_version": "2018-08-31",
        "parameters": {
            "port": {"type": "number", "constraints": [{"range": {"max": 9}}]},
            "pw": {"type": "string"},
        },
    }
    given = {"port": Secret("7"), "pw": Secret(CANARY)}
    defn = hot.build(child, {}, hot.Environment(), given, stack_name="c", stack_id="c")
    assert ({"port": 7, "pw": CANARY}, {"port", "pw"}) == (defn.params.values, set(defn.params.hidden))
    with pytest.raises(TemplateError) as e:
        hot.build(
            child, {}, hot.Environment(), {**given, "port": Secret("12345")}, stack_name="c", stack_id="c"
        )
    assert "12345" not in str(e.value)


def test_is_mapping_answers_as_isinstance_mapping() -> None:
    """The quick mapping test agrees with ``isinstance(x, Mapping)`` for plain values, subclasses and other Mappings."""

    class Text(str):
        pass

    class Dict(dict):  # type: ignore[type-arg]
        pass

    values: list[Any] = [
        {},
        {"a": 1},
        Dict(),
        collections.OrderedDict(),
        types.MappingProxyType({}),
        "s",
        Text("t"),
    ]
    values += [1, 2.5, True, None, [1], (1,), b"x", {1}]
    assert [taint.is_mapping(v) for v in values] == [isinstance(v, Mapping) for v in values]
    assert sum(taint.is_mapping(v) for v in values) == 5
