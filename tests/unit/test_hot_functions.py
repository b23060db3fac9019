"""Evaluation of HOT intrinsic functions, and the walks over calls."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from control.hot import (
    FUNCTIONS,
    TemplateError,
    calls,
    evaluate_condition,
    references,
    resolve,
    select,
    yaqlfn,
)


@dataclass
class FakeContext:
    """A stack with fixed parameters, resource ids, attributes, files and conditions."""

    params: dict[str, Any] = field(default_factory=dict)
    ids: dict[str, Any] = field(default_factory=dict)
    attrs: dict[tuple[str, str], Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, bool] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def param(self, name: str) -> Any:
        return self.params[name]

    def resource_id(self, name: str) -> Any:
        return self.ids[name]

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        self.asked.append(f"{name}.{attribute}")
        return select(self.attrs.get((name, attribute)), path)

    def file(self, path: str) -> str:
        return self.files[path]

    def facade(self, key: str) -> Any:
        return {"metadata": {"role": "web"}}.get(key)

    def condition(self, name: str) -> bool:
        return self.conditions[name]


CTX = FakeContext(
    params={
        "port": 8080,
        "names": ["a", "b"],
        "data": {"k": ["x", "y"], "n": {"m": 1}},
        "empty": "",
        "flag": True,
        "text": "a,b,c",
    },
    ids={"server": "srv-1", "cfg": "cfg-1"},
    attrs={("dep", "result"): {"rows": [{"v": 1}]}, ("server", "name"): "web"},
    files={"run.sh": "#!/bin/sh\necho hi\n"},
    conditions={"prod": True, "dev": False},
)


def ev(node: Any, ctx: FakeContext = CTX) -> Any:
    return resolve(node, ctx, "outputs.o.value")


def fails(node: Any) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        ev(node)
    return info.value


def test_function_names():
    """FUNCTIONS lists every supported function and nothing unsupported."""
    assert {
        "get_param",
        "str_replace_vstrict",
        "list_concat_unique",
        "make_url",
        "if",
        "filter",
        "yaql",
        "resource_facade",
    } <= FUNCTIONS
    assert not {"Fn::Join", "get_input"} & FUNCTIONS  # Fn::Join is rewritten to list_join (hot/cfn.py)


def test_plain_data_is_copied_unchanged():
    """Maps, lists and scalars without calls come back equal; maps with two keys are data."""
    node = {"a": [1, "x", None, {"get_param": "port", "other": 1}], "b": {"get_input": "x"}}
    assert ev(node) == node


def test_nested_calls_are_resolved_inside_data():
    """Calls nested in maps and lists are all evaluated."""
    node = {"a": [{"get_param": "port"}, {"get_resource": "server"}]}
    assert ev(node) == {"a": [8080, "srv-1"]}


# --- get_param / get_resource / get_attr / get_file -----------------------------------------------


def test_get_param_value_and_path():
    """get_param returns the value, following map keys and list indices."""
    assert ev({"get_param": "port"}) == 8080
    assert ev({"get_param": ["data", "k", 1]}) == "y"
    assert ev({"get_param": ["data", "k", "0"]}) == "x"
    assert ev({"get_param": ["data", "n", {"get_param": ["names", 0]}]}) == ""


def test_get_param_missing_path_gives_empty_string():
    """A path that leads nowhere gives '' as in Heat."""
    assert ev({"get_param": ["data", "zz"]}) == ""
    assert ev({"get_param": ["data", "k", 9]}) == ""
    assert ev({"get_param": ["port", "x"]}) == ""


def test_get_param_bad_arguments():
    """get_param needs a name or a non-empty list starting with a name."""
    assert fails({"get_param": []}).reason.startswith("get_param: expects a parameter name")
    assert fails({"get_param": [1]}).reason == "get_param: the parameter name must be a string"


def test_get_resource_gives_the_id():
    """get_resource returns the resource id from the context."""
    assert ev({"get_resource": "cfg"}) == "cfg-1"
    assert fails({"get_resource": ["cfg"]}).reason == "get_resource: expects a name (a string)"


def test_get_attr_value_and_path():
    """get_attr returns the attribute, then follows the path."""
    assert ev({"get_attr": ["server", "name"]}) == "web"
    assert ev({"get_attr": ["dep", "result", "rows", 0, "v"]}) == 1


def test_get_attr_none_and_missing_paths_give_none():
    """An attribute that is None, or a path that leads nowhere, gives None."""
    assert ev({"get_attr": ["dep", "missing", "x"]}) is None
    assert ev({"get_attr": ["dep", "result", "rows", 5]}) is None
    assert ev({"get_attr": ["server", "name", "x"]}) is None


def test_get_attr_bad_arguments():
    """get_attr needs a resource and an attribute name."""
    assert fails({"get_attr": ["dep"]}).reason == "get_attr: expects a list of at least 2 arguments"
    assert fails({"get_attr": ["dep", 1]}).reason.startswith("get_attr: the resource and attribute")


def test_get_file_gives_the_text():
    """get_file returns the file's content."""
    assert ev({"get_file": "run.sh"}) == "#!/bin/sh\necho hi\n"


# --- str_replace family --------------------------------------------------------------------------


def test_str_replace_basic():
    """Each param key is replaced by its value."""
    node = {
        "str_replace": {
            "template": "http://$host:$port/",
            "params": {"$host": "h", "$port": {"get_param": "port"}},
        }
    }
    assert ev(node) == "http://h:8080/"


def test_str_replace_longer_keys_first():
    """Longer keys win over the keys they contain."""
    node = {"str_replace": {"template": "$var $var_name", "params": {"$var": "A", "$var_name": "B"}}}
    assert ev(node) == "A B"


def test_str_replace_does_not_rescan_values():
    """A spliced value is not searched for other keys."""
    node = {"str_replace": {"template": "x y", "params": {"x": "y", "y": "z"}}}
    assert ev(node) == "y z"


def test_str_replace_non_string_values():
    """Numbers use str(), maps and lists JSON with sorted keys, null ''."""
    node = {
        "str_replace": {
            "template": "n=N m=M l=L z=Z b=B",
            "params": {"N": 1.5, "M": {"b": 1, "a": 2}, "L": [1, "x"], "Z": None, "B": True},
        }
    }
    assert ev(node) == 'n=1.5 m={"a": 2, "b": 1} l=[1, "x"] z= b=True'


def test_str_replace_errors():
    """The template must be a string and params a map of non-empty string keys."""
    assert (
        fails({"str_replace": {"template": 1, "params": {}}}).reason
        == "str_replace: the template must be a string"
    )
    assert (
        fails({"str_replace": {"template": "x", "params": []}}).reason == "str_replace: params must be a map"
    )
    assert "non-empty strings" in fails({"str_replace": {"template": "x", "params": {"": "y"}}}).reason
    assert "misses" in fails({"str_replace": {"params": {}}}).reason


def test_str_replace_keeps_unused_params():
    """Plain str_replace ignores params absent from the template."""
    assert ev({"str_replace": {"template": "abc", "params": {"zzz": "1"}}}) == "abc"


def test_str_replace_strict_refuses_absent_params():
    """str_replace_strict fails when a param is not in the template."""
    e = fails({"str_replace_strict": {"template": "a", "params": {"a": "1", "b": "2", "c": "3"}}})
    assert (e.path, e.reason) == (
        "outputs.o.value",
        "str_replace_strict: params not found in the template: b, c",
    )
    assert ev({"str_replace_strict": {"template": "a", "params": {"a": ""}}}) == ""


def test_str_replace_vstrict_refuses_empty_values():
    """str_replace_vstrict also fails on an empty or null value."""
    assert ev({"str_replace_vstrict": {"template": "a", "params": {"a": "1"}}}) == "1"
    empties: list[Any] = ["", None, [], {}]
    for empty in empties:
        e = fails({"str_replace_vstrict": {"template": "a", "params": {"a": empty}}})
        assert e.reason == "str_replace_vstrict: param 'a' is empty"
    assert "not found" in fails({"str_replace_vstrict": {"template": "a", "params": {"b": "1"}}}).reason


def test_str_replace_result_size_is_capped():
    """A replacement that would build a huge string is refused."""
    node = {"str_replace": {"template": "x" * 10_000, "params": {"x": "y" * 10_000}}}
    assert "would exceed" in fails(node).reason


# --- list_join / str_split -------------------------------------------------------------------------


def test_list_join_one_and_several_lists():
    """list_join joins the items of one or more lists with the delimiter."""
    assert ev({"list_join": [", ", ["one", "two"], ["three"]]}) == "one, two, three"
    assert ev({"list_join": [",", {"get_param": "names"}]}) == "a,b"
    assert ev({"list_join": ["-", []]}) == ""


def test_list_join_encodes_maps_and_lists_as_json():
    """Map and list items are JSON (sorted keys); null items are ''; numbers str()."""
    assert ev({"list_join": ["|", [{"b": 1, "a": [2]}, [1], None, 3]]}) == '{"a": [2], "b": 1}|[1]||3'


def test_list_join_errors():
    """The delimiter must be a string and the rest lists."""
    assert fails({"list_join": [1, ["a"]]}).reason == "list_join: the delimiter must be a string"
    assert fails({"list_join": [",", "ab"]}).reason.startswith("list_join: expects lists to join")
    assert fails({"list_join": [","]}).reason == "list_join: expects a list of at least 2 arguments"


def test_str_split_list_and_index():
    """str_split returns the parts, or one part by index."""
    assert ev({"str_split": [",", {"get_param": "text"}]}) == ["a", "b", "c"]
    assert ev({"str_split": [",", "a,b,c", 1]}) == "b"
    assert ev({"str_split": [",", "a,b,c", "2"]}) == "c"
    assert ev({"str_split": [",", None]}) is None


def test_str_split_errors():
    """An index out of range or a bad delimiter is an error."""
    assert fails({"str_split": [",", "a,b", 5]}).reason == "str_split: index 5 is not in 0..1"
    assert fails({"str_split": ["", "ab"]}).reason == "str_split: the delimiter must be a non-empty string"
    assert fails({"str_split": [",", 5]}).reason.startswith("str_split: expects a string")


# --- digest --------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["md5", "sha1", "sha224", "sha256", "sha384", "sha512", "SHA256"])
def test_digest_algorithms(algorithm):
    """digest returns the hex digest with each supported algorithm."""
    expected = hashlib.new(algorithm.lower(), b"secret").hexdigest()
    assert ev({"digest": [algorithm, "secret"]}) == expected


def test_digest_matches_heat_for_latin1_and_handles_other_text():
    """Text latin-1 can encode hashes as latin-1 bytes (Heat's); other text as UTF-8."""
    assert ev({"digest": ["sha256", "é"]}) == hashlib.sha256("é".encode("latin-1")).hexdigest()
    assert ev({"digest": ["sha256", "€"]}) == hashlib.sha256("€".encode()).hexdigest()


def test_digest_errors():
    """Unknown algorithms and non-string values are errors."""
    assert fails({"digest": ["crc32", "x"]}).reason.startswith("digest: algorithm must be one of md5")
    assert fails({"digest": ["md5", 5]}).reason == "digest: the algorithm and the value must be strings"
    assert fails({"digest": ["md5"]}).reason == "digest: expects a list of 2 arguments"


# --- repeat --------------------------------------------------------------------------------------


def test_repeat_single_list():
    """repeat renders the template once per item, in strings, keys and values."""
    node = {
        "repeat": {"for_each": {"<%p%>": ["80", 443]}, "template": {"port_<%p%>": {"min": "<%p%>", "n": 1}}}
    }
    assert ev(node) == [{"port_80": {"min": "80", "n": 1}}, {"port_443": {"min": "443", "n": 1}}]


def test_repeat_permutations():
    """Several lists give every combination, first list outermost."""
    node = {"repeat": {"for_each": {"%a%": ["1", "2"], "%b%": ["x", "y"]}, "template": "%a%%b%"}}
    assert ev(node) == ["1x", "1y", "2x", "2y"]


def test_repeat_without_permutations_zips():
    """permutations: false pairs the lists item by item."""
    node = {
        "repeat": {
            "for_each": {"%a%": ["1", "2"], "%b%": ["x", "y"]},
            "template": "%a%%b%",
            "permutations": False,
        }
    }
    assert ev(node) == ["1x", "2y"]


def test_repeat_map_values_use_keys():
    """A map in for_each iterates over its keys."""
    assert ev({"repeat": {"for_each": {"K": {"a": 1, "b": 2}}, "template": "K"}}) == ["a", "b"]


def test_repeat_errors():
    """Unequal lists without permutations, non-lists and bad flags are errors."""
    e = fails({"repeat": {"for_each": {"a": ["1"], "b": []}, "template": "a", "permutations": False}})
    assert e.reason == "repeat: with permutations false, the lists must be as long"
    assert (
        fails({"repeat": {"for_each": {"a": "xy"}, "template": "a"}}).reason
        == "repeat: for_each.a must be a list"
    )
    e = fails({"repeat": {"for_each": {"a": []}, "template": "a", "permutations": "no"}})
    assert e.reason == "repeat: permutations must be true or false"
    assert "misses" in fails({"repeat": {"template": "a"}}).reason
    assert (
        "would exceed"
        in fails(
            {"repeat": {"for_each": {"a": list(range(4000)), "b": list(range(4000))}, "template": "ab"}}
        ).reason
    )


# --- maps and lists ------------------------------------------------------------------------------


def test_map_merge_later_wins():
    """map_merge merges maps in order; nulls are skipped."""
    assert ev({"map_merge": [{"a": 1, "b": 2}, None, {"b": 3}]}) == {"a": 1, "b": 3}
    assert ev({"map_merge": []}) == {}
    assert fails({"map_merge": [{"a": 1}, [1]]}).reason.startswith("map_merge: expects maps")


def test_map_replace_keys_and_values():
    """map_replace renames keys and replaces values."""
    node = {
        "map_replace": [{"k1": "v1", "k2": "v2", "k3": [1]}, {"keys": {"k1": "K1"}, "values": {"v2": "V2"}}]
    }
    assert ev(node) == {"K1": "v1", "k2": "V2", "k3": [1]}


def test_map_replace_collisions_and_bad_arguments():
    """A renamed key that collides, or a wrong argument form, is an error."""
    e = fails({"map_replace": [{"a": 1, "b": 2}, {"keys": {"a": "b"}}]})
    assert e.reason == "map_replace: key replacement 'b' collides with a key"
    assert fails({"map_replace": [{"a": 1}, {"other": {}}]}).reason.startswith("map_replace: expects")
    assert (
        fails({"map_replace": [{"a": 1}, {"keys": {"a": [1]}}]}).reason == "map_replace: [1] cannot be a key"
    )


def test_list_concat_and_unique():
    """list_concat joins lists; list_concat_unique drops repeats, keeping first places."""
    assert ev({"list_concat": [[1, 2], None, [2, {"a": 1}]]}) == [1, 2, 2, {"a": 1}]
    assert ev({"list_concat_unique": [[1, 2], [2, 3, 1]]}) == [1, 2, 3]
    assert fails({"list_concat": [[1], "ab"]}).reason.startswith("list_concat: expects lists")


def test_contains():
    """contains looks for a value in a list or a substring in a string."""
    assert ev({"contains": ["a", {"get_param": "names"}]}) is True
    assert ev({"contains": ["z", ["a"]]}) is False
    assert ev({"contains": ["b,c", "a,b,c"]}) is True
    assert fails({"contains": ["a", 5]}).reason.startswith("contains: expects a list")


def test_filter_removes_values():
    """filter removes the given values from a list."""
    assert ev({"filter": [[3, None], [1, 2, 3, None]]}) == [1, 2]
    assert ev({"filter": [None, [1]]}) == [1]
    assert ev({"filter": [[1], []]}) == []
    assert fails({"filter": [[1], "abc"]}).reason == "filter: expects [values to remove, list]"


# --- conditions ----------------------------------------------------------------------------------


def test_equals_not_and_or():
    """Condition functions evaluate values, booleans and condition names."""
    assert ev({"equals": [{"get_param": "port"}, 8080]}) is True
    assert ev({"not": "prod"}) is False
    assert ev({"not": {"equals": [1, 2]}}) is True
    assert ev({"and": ["prod", True, {"not": "dev"}]}) is True
    assert ev({"or": ["dev", False]}) is False
    assert ev({"or": [{"get_param": "flag"}, "dev"]}) is True


def test_condition_errors():
    """Non-boolean conditions and wrong arities are errors."""
    assert fails({"not": 5}).reason == "a condition must be true, false or a condition name, not 5"
    assert fails({"and": ["prod"]}).reason == "and: expects a list of at least 2 arguments"
    assert fails({"equals": [1]}).reason == "equals: expects a list of 2 arguments"


def test_if_picks_and_evaluates_one_branch():
    """if evaluates only the chosen value; the condition may be a name, bool or inline."""
    ctx = FakeContext(conditions={"prod": False}, attrs={("a", "x"): "ax"})
    node = {"if": ["prod", {"get_attr": ["a", "y"]}, {"get_attr": ["a", "x"]}]}
    assert ev(node, ctx) == "ax"
    assert ctx.asked == ["a.x"]
    assert ev({"if": [True, 1, 2]}) == 1
    assert ev({"if": [{"equals": [{"get_param": "port"}, 1]}, 1, 2]}) == 2


def test_if_errors():
    """if needs two or three arguments and a real condition."""
    assert fails({"if": ["prod"]}).reason == "if: expects a list of 2 to 3 arguments"
    e = fails({"if": [[1], 1, 2]})
    assert e.path == "outputs.o.value.if[0]"


def test_evaluate_condition_directly():
    """evaluate_condition accepts booleans, names and calls."""
    assert evaluate_condition(True, CTX) is True
    assert evaluate_condition("dev", CTX) is False
    assert evaluate_condition({"or": ["dev", "prod"]}, CTX) is True


# --- make_url ------------------------------------------------------------------------------------


def test_make_url_full():
    """make_url assembles and quotes every part."""
    node = {
        "make_url": {
            "scheme": "https",
            "username": "u@x",
            "password": "p w",
            "host": "example.com",
            "port": 8443,
            "path": "/a b",
            "query": {"q": "1/2", "r": "s t"},
            "fragment": "f g",
        }
    }
    assert ev(node) == "https://u%40x:p%20w@example.com:8443/a%20b?q=1/2&r=s+t#f%20g"


def test_make_url_ipv6_and_minimal():
    """IPv6 hosts get brackets; absent parts are left out."""
    assert (
        ev({"make_url": {"scheme": "http", "host": "::1", "port": "80", "path": "/"}}) == "http://[::1]:80/"
    )
    assert ev({"make_url": {"scheme": "http", "host": "[fe80::1]"}}) == "http://[fe80::1]"
    assert ev({"make_url": {"host": "h"}}) == "//h"


def test_make_url_errors():
    """Bad ports, schemes with ':' and unknown keys are errors."""
    assert (
        fails({"make_url": {"host": "h", "port": 70000}}).reason == "make_url: port 70000 is not in 1..65535"
    )
    assert fails({"make_url": {"host": "h", "port": "x"}}).reason == 'make_url: invalid port "x"'
    assert fails({"make_url": {"scheme": "http:"}}).reason == "make_url: scheme must not contain ':'"
    assert "unknown keys" in fails({"make_url": {"hostname": "h"}}).reason
    assert fails({"make_url": {"host": 5}}).reason == "make_url: host must be a string"


# --- walks ---------------------------------------------------------------------------------------


def test_calls_lists_every_call_with_paths():
    """calls yields (path, name, args) for every call, outer before inner."""
    node = {"a": {"list_join": [",", [{"get_param": "p"}]]}, "b": [{"get_resource": "r"}]}
    assert list(calls(node)) == [
        ("a", "list_join", [",", [{"get_param": "p"}]]),
        ("a.list_join[1][0]", "get_param", "p"),
        ("b[0]", "get_resource", "r"),
    ]
    assert next(p for p, _, _ in calls(node, "outputs.o")) == "outputs.o.a"


def test_references_names_resources_used():
    """references finds get_resource and get_attr targets, not parameters."""
    node = {
        "x": {"get_resource": "a"},
        "y": [{"get_attr": ["b", "z"]}],
        "p": {"get_param": "c"},
        "i": {"if": ["cond", {"get_resource": "d"}, None]},
    }
    assert references(node) == {"a", "b", "d"}


def test_resolve_result_is_json_serialisable():
    """What resolve returns is plain JSON data."""
    node = {"a": {"repeat": {"for_each": {"X": ["1"]}, "template": {"k": "X"}}}, "b": {"get_param": "data"}}
    assert json.loads(json.dumps(ev(node))) == ev(node)


# --- if with two arguments (2021-04-16), yaql ----------------------------------------------------


def test_a_false_two_argument_if_leaves_out_its_item() -> None:
    """A list item or map entry whose two-argument if is false is dropped; a true one stays."""
    node = {
        "list": ["a", {"if": ["dev", "b"]}, {"if": ["prod", "c"]}],
        "map": {"x": {"if": ["dev", 1]}, "y": 2},
    }
    assert ev(node) == {"list": ["a", "c"], "map": {"y": 2}}
    assert ev({"if": ["dev", "gone"]}) is None  # a whole value left out is null


def test_yaql_evaluates_an_expression_over_its_data() -> None:
    """yaql: {expression, data} gives the expression's value, with $.data the (evaluated) data."""
    assert ev({"yaql": {"expression": "$.data.v.sum()", "data": {"v": [3, 2, 1]}}}) == 6
    node = {"yaql": {"expression": "$.data.names.select($ + '!')", "data": {"names": {"get_param": "names"}}}}
    assert ev(node) == ["a!", "b!"]


def test_yaql_bounds_refuse_what_would_run_long_or_grow_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """A collection over 200 items, a string over the memory quota or a run over the time bound fail, naming yaql."""
    # The size checks with time to spare on a loaded machine; the time bound with a short one.
    monkeypatch.setattr(yaqlfn, "TIME_LIMIT", 60.0)
    assert "Collection length exceeds 200" in fails({"yaql": {"expression": "range(1000).sum()"}}).reason
    assert "MemoryQuota" in fails({"yaql": {"expression": "'a' * 100000"}}).reason
    assert "bad expression" in fails({"yaql": {"expression": "$.data.("}}).reason
    monkeypatch.setattr(yaqlfn, "TIME_LIMIT", 0.5)
    slow = "let(x => range(150).toList()) -> $x.join($x, true, [$1, $2]).len()"
    assert "took longer than 0.5 s" in fails({"yaql": {"expression": slow}}).reason
