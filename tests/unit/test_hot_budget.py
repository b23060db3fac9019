"""The evaluation budget: every function's output is counted before it is built, per call and in all."""

from __future__ import annotations

from typing import Any

import pytest

from control.hot import Budget, BudgetError, TemplateError, evaluating, resolve, yaqlfn
from control.hot.budget import MAX_CALL_BYTES, SLOT
from control.hot.parameters import ParameterDef, check_constraints


class Ctx:
    """Parameters only; resources are not made yet (get_attr gives null, as in a dry run)."""

    def __init__(self, **params: Any) -> None:
        self.params = params

    def param(self, name: str) -> Any:
        return self.params[name]

    def resource_id(self, name: str) -> Any:
        return "00000000-0000-0000-0000-000000000000"

    def facade(self, key: str) -> Any:
        return None

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        return None

    def file(self, path: str) -> str:
        return ""

    def condition(self, name: str) -> bool:
        return False


KB = "k" * 1024
MB_CALL = {"str_replace": {"template": "x" * 1024, "params": {"x": {"get_param": "kb"}}}}


def refused(node: Any, budget: Budget | None = None) -> BudgetError:
    with evaluating(budget or Budget()), pytest.raises(BudgetError) as e:
        resolve(node, Ctx(kb=KB, commas="," * 1024, list=[KB] * 1000), "resources.r.properties.p")
    return e.value


@pytest.mark.parametrize(
    ("case", "node"),
    [
        (
            "repeat grows each copy",
            {"repeat": {"for_each": {"%i%": [{"get_param": "kb"}] * 50}, "template": "%i%" * 200}},
        ),
        ("str_replace", {"str_replace": {"template": "x" * 9000, "params": {"x": {"get_param": "kb"}}}}),
        ("list_join delimiter", {"list_join": [{"get_param": "kb"}, ["a"] * 9000]}),
        ("map_merge", {"map_merge": [{f"k{i}": MB_CALL} for i in range(9)]}),
        ("map_replace", {"map_replace": [{"list_concat": [{"get_param": "list"}] * 9}, {}]}),
        ("list_concat", {"list_concat": [{"get_param": "list"}] * 9}),
        ("list_concat_unique", {"list_concat_unique": [{"get_param": "list"}] * 9}),
        ("filter", {"filter": [[], {"list_concat": [{"get_param": "list"}] * 9}]}),
        (
            "str_split",
            {
                "str_split": [
                    ",",
                    {"str_replace": {"template": "x" * 600, "params": {"x": {"get_param": "commas"}}}},
                ]
            },
        ),
        (
            "make_url",
            {
                "make_url": {
                    "host": {"str_replace": {"template": "x" * 3000, "params": {"x": {"get_param": "kb"}}}}
                }
            },
        ),
    ],
)
def test_each_builder_refuses_past_the_per_call_cap_naming_its_path(case: str, node: Any) -> None:
    """Each builder stops at 8 MiB per call, before building it, with the path of the call."""
    error = refused(node, Budget(None))
    assert error.path.startswith("resources.r.properties.p"), case
    assert f"the cap of {MAX_CALL_BYTES} bytes per call" in error.reason, case


def test_calls_under_their_cap_still_exhaust_the_evaluation_budget() -> None:
    """Ten 1 MiB calls under a 5 MiB budget: the sixth is refused, naming the budget's option."""
    node = {"list_concat": [[MB_CALL] for _ in range(10)]}
    error = refused(node, Budget(5 * 1024 * 1024))
    assert "--max-evaluation-bytes" in error.reason
    assert error.path.startswith("resources.r.properties.p.list_concat")


def test_a_lookup_is_counted_each_time_it_is_used() -> None:
    """A 1 KiB parameter read 10,000 times is 10 MiB of stored properties: over a 5 MiB budget."""
    error = refused([{"get_param": "kb"}] * 10_000, Budget(5 * 1024 * 1024))
    assert "get_param" in error.reason


def test_a_value_shared_by_reference_is_counted_as_it_would_be_stored() -> None:
    """list_concat of a list with itself, nested 30 deep, is refused: references are counted unshared."""
    node: Any = ["x" * 100]
    for _ in range(30):
        node = {"list_concat": [node, node]}
    assert "cap" in refused(node, Budget(None)).reason


def test_sizes_count_text_and_a_slot_per_item() -> None:
    """A string is its length; a list or map adds SLOT for itself and each item or entry."""
    budget = Budget()
    assert 3 == budget.size("abc")
    assert SLOT + 2 * SLOT + 2 == budget.size(["a", "b"])
    assert SLOT + SLOT + 1 + SLOT == budget.size({"k": 5})


def test_a_dry_run_turns_placeholder_errors_into_null_but_never_budget_errors() -> None:
    """leniently(): digest of a null attribute gives null; an over-budget call is still refused."""
    budget = Budget(1024 * 1024)
    node = {"a": {"digest": ["sha256", {"get_attr": ["x", "y"]}]}, "b": MB_CALL}
    with evaluating(budget), budget.leniently():
        with pytest.raises(BudgetError):
            resolve(node, Ctx(kb=KB), "p")
        assert {"a": None} == resolve({"a": node["a"]}, Ctx(kb=KB), "p")
    with evaluating(Budget()), pytest.raises(TemplateError, match="digest"):
        resolve(node["a"], Ctx(kb=KB), "p")


def test_unique_and_filter_keep_heats_results_in_linear_time() -> None:
    """list_concat_unique and filter compare maps and lists by value, 1 and true as Python does."""
    ctx = Ctx()
    unique = {"list_concat_unique": [[{"a": [1, 2]}, "x", 1], [{"a": [1, 2]}, True, "x", [3]]]}
    assert [{"a": [1, 2]}, "x", 1, [3]] == resolve(unique, ctx)
    assert [{"b": 1}, 2] == resolve({"filter": [[{"a": 1}, "z"], [{"a": 1}, {"b": 1}, "z", 2]]}, ctx)
    many = list(range(100_000))  # a list scan per item would take minutes
    assert many == resolve({"list_concat_unique": [many, many]}, ctx)


BACKTRACKS = ParameterDef(
    name="w",
    type="string",
    default=None,
    has_default=False,
    hidden=False,
    description=None,
    label=None,
    constraints=({"allowed_pattern": "(a|a)+"},),
)


def test_a_pattern_that_backtracks_is_refused_naming_it_within_its_time() -> None:
    """(a|a)+ on 29 a's and a '!' runs out of the budget's pattern time: refused naming the pattern."""
    with evaluating(Budget(pattern_seconds=0.2)), pytest.raises(TemplateError) as e:
        check_constraints(BACKTRACKS, "a" * 29 + "!", "parameters.w")
    assert "parameters.w" == e.value.path
    assert "(a|a)+" in e.value.reason and "backtracks" in e.value.reason


def test_patterns_are_not_matched_again_when_the_budget_says_so() -> None:
    """The engine re-reading a stack (patterns=False) does not match values checked when given."""
    with evaluating(Budget(patterns=False)):
        check_constraints(BACKTRACKS, "a" * 29 + "!", "parameters.w")


def test_what_yaql_gives_is_charged_to_the_budget_naming_the_call() -> None:
    """A yaql result counts as any function's: 200 strings of 9,000 characters go past a 512 KiB budget."""
    node = {"yaql": {"expression": "range(200).select('x' * 9000)"}}
    error = refused(node, Budget(512 * 1024))
    assert ("resources.r.properties.p", True) == (error.path, "yaql" in error.reason), error
    with evaluating(budget := Budget()):
        assert 200 == len(resolve(node, Ctx(), "p"))
    assert budget.used > 200 * 9000


def test_yaql_time_is_bounded_for_the_whole_evaluation_and_a_dry_run_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two slow expressions share the evaluation's yaql time; over it is a BudgetError even in a dry run."""
    monkeypatch.setattr(yaqlfn, "TIME_LIMIT", 60.0)  # each call alone could run on
    slow = {"yaql": {"expression": "let(x => range(150).toList()) -> $x.join($x, true, [$1, $2]).len()"}}
    budget = Budget(yaql_seconds=0.3)
    with evaluating(budget), budget.leniently(), pytest.raises(BudgetError) as e:
        resolve([slow, slow], Ctx(), "resources.r.properties.p")
    assert e.value.path.startswith("resources.r.properties.p"), e.value
    assert "yaql expressions took longer than 0.3 s in all" in e.value.reason
    quota = {"yaql": {"expression": "range(1000).sum()"}}  # yaql's own bound: refused in a dry run too
    with evaluating(budget := Budget()), budget.leniently(), pytest.raises(BudgetError, match="200"):
        resolve(quota, Ctx(), "p")
