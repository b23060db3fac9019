"""A parsed template keeps equal parts of its resources once (control/hot/sharing.py)."""

from __future__ import annotations

import json
import math
import tracemalloc
from typing import Any

from bench.scale_parts import template
from control.hot import parse_template
from control.hot.sharing import Shared
from control.hot.taint import Secret


def test_equal_parts_are_one_object_and_values_are_unchanged() -> None:
    shared = Shared()
    first = shared.tree({"a": {"get_resource": "cfg"}, "b": [1, "x", None], "c": 1.5})
    second = shared.tree(json.loads('{"a": {"get_resource": "cfg"}, "b": [1, "x", null], "c": 1.5}'))
    assert first == second == {"a": {"get_resource": "cfg"}, "b": [1, "x", None], "c": 1.5}
    assert first is second  # the whole map, being equal, is one
    assert shared.tree({"a": {"get_resource": "cfg"}, "b": []})["a"] is first["a"]


def test_values_equal_in_python_but_not_in_a_template_stay_apart() -> None:
    shared = Shared()
    ones = [shared.tree({"k": v}) for v in (1, True, 1.0)]
    assert [type(m["k"]) for m in ones] == [int, bool, float]
    zeros = [shared.tree([v]) for v in (0.0, -0.0)]
    assert [math.copysign(1, z[0]) for z in zeros] == [1.0, -1.0]
    ordered = [shared.tree({"a": 1, "b": 2}), shared.tree({"b": 2, "a": 1})]
    assert [list(m) for m in ordered] == [["a", "b"], ["b", "a"]]
    nan = shared.tree([math.nan])
    assert math.isnan(nan[0])


def test_the_input_is_not_aliased_and_other_objects_pass_as_they_are() -> None:
    secret = Secret("s3cret")
    given: dict[str, Any] = {"inner": {"x": [1]}, "hidden": secret}
    built = Shared().tree(given)
    assert built == given
    assert built is not given and built["inner"] is not given["inner"]
    assert built["inner"]["x"] is not given["inner"]["x"]
    assert built["hidden"] is secret


def test_a_big_template_parses_to_the_same_definition_in_a_third_of_the_memory() -> None:
    """The scale bench's template of 2,000 deployments (one config, a server per five): its parsed resources equal the template's, and the
    calls they repeat are one object. Without sharing, the parse kept ~2 KB a deployment alive
    (measured 2,048 B at 100,000); with it, ~0.65 KB. Asserted loosely: under 1.2 KB."""
    text = json.dumps(template(2000))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        parsed = parse_template(json.loads(text))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    source = json.loads(text)["resources"]
    assert {name: r.properties for name, r in parsed.resources.items()} == {
        name: body["properties"] for name, body in source.items()
    }
    deps = [parsed.resources[f"d{i}"] for i in range(2000)]
    assert len({id(d.properties["config"]) for d in deps}) == 1
    assert len({id(d.properties["input_values"]) for d in deps}) == 10
    assert len({id(d.original_type) for d in deps}) == 1
    assert len({id(parsed.dependencies(d.name)) for d in deps}) == 400  # one set per server
    assert held / 2000 < 1200, f"{held / 2000:.0f} B a deployment"
