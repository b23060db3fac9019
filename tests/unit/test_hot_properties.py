"""Property tests: the parsers fail only with TemplateError, and function laws hold."""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.hot import (
    FUNCTIONS,
    TYPES,
    Environment,
    TemplateError,
    condition_values,
    load_yaml,
    parse_environment,
    parse_template,
    resolve,
    resolve_parameters,
    select,
)


class AnyContext:
    """A context that answers every question with something plausible."""

    def param(self, name: str) -> Any:
        return {"a": [1, "x"], "b": None}

    def resource_id(self, name: str) -> Any:
        return f"id-{name}"

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        return select(None if attribute == "none" else {"k": [attribute]}, path)

    def file(self, path: str) -> str:
        return "text"

    def facade(self, key: str) -> Any:
        return None

    def condition(self, name: str) -> bool:
        return len(name) % 2 == 0


WORDS = [
    "heat_template_version",
    "resources",
    "outputs",
    "parameters",
    "conditions",
    "type",
    "properties",
    "value",
    "default",
    "constraints",
    "depends_on",
    "condition",
    "metadata",
    "template",
    "params",
    "for_each",
    "permutations",
    "keys",
    "values",
    "server",
    "config",
    "inputs",
    "name",
    "a",
    "b",
    "2018-08-31",
    "rocky",
    "string",
    "number",
    "json",
    "boolean",
    "comma_delimited_list",
    "range",
    "length",
    "min",
    "max",
    "allowed_values",
    "Fn::Join",
    "Ref",
    "yaql",
    "get_input",
    *sorted(FUNCTIONS),
    *sorted(TYPES),
]

scalars = st.one_of(
    st.sampled_from(WORDS),
    st.text(max_size=8),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
)
keys = st.one_of(st.sampled_from(WORDS), st.text(max_size=6), st.integers(-2, 2))
nodes = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=4),
        st.builds(lambda f, a: {f: a}, st.sampled_from(WORDS), inner),
    ),
    max_leaves=30,
)


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually a valid value, sometimes any scalar."""
    return st.integers(0, 9).flatmap(lambda i: valid if i else scalars)


@st.composite
def templates(draw: st.DrawFn) -> dict[Any, Any]:
    """Template-shaped maps whose parts are random, so parsing goes deep before failing."""
    resource = st.fixed_dictionaries(
        {"type": mostly(st.sampled_from(sorted(TYPES)))},
        optional={
            "properties": st.dictionaries(keys, nodes, max_size=4),
            "depends_on": nodes,
            "condition": nodes,
            "metadata": nodes,
            "deletion_policy": nodes,
        },
    )
    parameter = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "number", "json", "comma_delimited_list", "boolean"])},
        optional={
            "default": nodes,
            "constraints": st.lists(st.dictionaries(keys, nodes, max_size=2), max_size=2),
            "hidden": nodes,
        },
    )
    return draw(
        st.fixed_dictionaries(
            {"heat_template_version": mostly(st.sampled_from(["2018-08-31", "rocky", "2013-05-23"]))},
            optional={
                "resources": st.dictionaries(
                    st.sampled_from(["a", "b", "c", "server", "bad name"]), resource, max_size=4
                ),
                "parameters": st.dictionaries(st.sampled_from(["a", "b", "p"]), parameter, max_size=3),
                "outputs": st.dictionaries(
                    st.sampled_from(["o", "p"]),
                    st.fixed_dictionaries({"value": nodes}, optional={"condition": nodes}),
                    max_size=2,
                ),
                "conditions": st.dictionaries(st.sampled_from(["a", "b", "c"]), nodes, max_size=3),
                "description": mostly(st.text(max_size=5)),
            },
        )
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(templates())
def test_parse_template_raises_only_template_error(source):
    """parse_template of any template-shaped map returns a Template or raises TemplateError."""
    try:
        t = parse_template(source, files={"text": "x"})
    except TemplateError:
        return
    t.order()
    with contextlib.suppress(TemplateError):
        condition_values(t, resolve_parameters(t, Environment(), {}))
    for output in t.outputs.values():
        with contextlib.suppress(TemplateError):
            resolve(output.value, AnyContext(), "outputs")


@settings(max_examples=300, deadline=None)
@given(nodes)
def test_parse_template_of_any_data_raises_only_template_error(data):
    """parse_template of arbitrary data raises nothing but TemplateError."""
    resources = {"r": {"type": "OS::Heat::None", "properties": {"x": data}}}
    with contextlib.suppress(TemplateError):
        parse_template(
            {"heat_template_version": "2018-08-31", "resources": resources, "outputs": {"o": {"value": data}}}
        )


@settings(max_examples=300, deadline=None)
@given(nodes)
def test_resolve_raises_only_template_error(node):
    """resolve of arbitrary data with a permissive context raises nothing but TemplateError."""
    with contextlib.suppress(TemplateError):
        resolve(node, AnyContext(), "x")


yaml_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(list("ab:- \n[]{},'\"&*!|>#%@`?\t0123456789.")), max_size=60),
    nodes.map(lambda n: yaml.safe_dump(n, default_flow_style=None)),
)


@settings(max_examples=300, deadline=None)
@given(yaml_text)
def test_yaml_loaders_raise_only_template_error(text):
    """load_yaml, parse_template and parse_environment raise only TemplateError on any text."""
    for call in (lambda: load_yaml(text, "t"), lambda: parse_template(text), lambda: parse_environment(text)):
        with contextlib.suppress(TemplateError):
            call()


@given(st.lists(st.text(alphabet="abc,;", max_size=5), min_size=1), st.sampled_from([",", ";", "::"]))
def test_list_join_then_str_split_round_trips(items, delimiter):
    """str_split undoes list_join when no item contains the delimiter."""
    items = [i.replace(delimiter, "") for i in items]
    joined = resolve({"list_join": [delimiter, items]}, AnyContext())
    assert joined == delimiter.join(items)
    assert resolve({"str_split": [delimiter, joined]}, AnyContext()) == items


@given(st.text())
def test_str_replace_without_params_is_identity(text):
    """str_replace with no params returns the template unchanged."""
    assert resolve({"str_replace": {"template": text, "params": {}}}, AnyContext()) == text


@given(
    st.text(alphabet="abxy", max_size=20),
    st.text(alphabet="ab", min_size=1, max_size=3),
    st.text(alphabet="xyab", max_size=4),
)
def test_str_replace_with_one_param_is_str_replace(text, key, value):
    """With a single param, str_replace equals Python's str.replace."""
    node = {"str_replace": {"template": text, "params": {key: value}}}
    assert resolve(node, AnyContext()) == text.replace(key, value)


@given(
    st.text(alphabet="ab", max_size=12),
    st.dictionaries(
        st.text(alphabet="ab", min_size=1, max_size=3), st.text(alphabet="XY", max_size=2), max_size=4
    ),
)
def test_str_replace_never_rescans_values(text, params):
    """Spliced values (made of other letters) survive; no key letters are left over from keys."""
    result = resolve({"str_replace": {"template": text, "params": params}}, AnyContext())
    if "a" in params and "b" in params:
        assert set(result) <= {"X", "Y"}


@given(st.lists(st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=3), max_size=4))
def test_map_merge_is_dict_update(maps):
    """map_merge equals successive dict.update."""
    expected: dict[str, int] = {}
    for m in maps:
        expected.update(m)
    assert resolve({"map_merge": maps}, AnyContext()) == expected


@given(st.lists(st.booleans(), min_size=2, max_size=5))
def test_and_or_match_python(flags):
    """and/or of booleans equal all() and any()."""
    assert resolve({"and": flags}, AnyContext()) is all(flags)
    assert resolve({"or": flags}, AnyContext()) is any(flags)


@given(
    st.sampled_from(["md5", "sha1", "sha224", "sha256", "sha384", "sha512"]), st.text(alphabet="abc\u00e9")
)
def test_digest_is_hashlib(algorithm, text):
    """digest equals hashlib over the latin-1 bytes Heat uses."""
    expected = hashlib.new(algorithm, text.encode("latin-1")).hexdigest()
    assert resolve({"digest": [algorithm, text]}, AnyContext()) == expected


@given(st.integers(-(10**12), 10**12))
def test_number_parameters_round_trip_through_text(n):
    """A number given as text converts back to the same int."""
    t = parse_template({"heat_template_version": "2018-08-31", "parameters": {"n": {"type": "number"}}})
    assert resolve_parameters(t, Environment(), {"n": str(n)}).values["n"] == n
