"""The canary's arithmetic and the member queue a rollback builds (pure parts of deployment groups)."""

from __future__ import annotations

from typing import Any

import pytest

from control import hot
from control.errors import BadRequestError
from control.resources import canary
from control.resources.base import Res
from control.resources.groups import member_queue
from control.store.orm import DeploymentRow, StackRow


def res(policy: dict[str, Any], action: str = "UPDATE") -> Res:
    return Res(
        StackRow(id="s", name="s", action=action), "fleet", "OS::Heat::SoftwareDeploymentGroup", policy
    )


def member(status: str) -> DeploymentRow:
    return DeploymentRow(id=status, resource_name="m", status=status, status_reason=f"it is {status}")


def judged(status: str) -> canary.Member:
    return ("m", status, f"it is {status}")


def test_percent_rounds_up_and_min_complete_defaults_to_all_but_max_failed() -> None:
    """20 % of 7 members is 2; with max_failed 1 the canary needs 1 complete."""
    found = canary.policy(res({"canary": {"percent": 20, "success": {"max_failed": 1}}}), 7)
    assert found == {"size": 2, "pause": 0.0, "min_complete": 1, "max_failed": 1}


def test_no_canary_in_a_rollback_or_for_an_update_that_runs_nobody() -> None:
    """A rollback returns what ran at once; an update running no member has no canary."""
    assert canary.policy(res({"canary": {"count": 2}}, action="ROLLBACK"), 10) is None
    assert canary.policy(res({"canary": {"count": 2}}), 0) is None


@pytest.mark.parametrize(
    ("given", "where"),
    [
        ({"count": 0}, "resources.fleet.update_policy.canary.count"),
        ({"count": 1, "percent": 5}, "resources.fleet.update_policy.canary"),
        ({"percent": 150}, "resources.fleet.update_policy.canary.percent"),
        ({"count": 2, "pause": -1}, "resources.fleet.update_policy.canary.pause"),
        (
            {"count": 2, "success": {"max_failed": -1}},
            "resources.fleet.update_policy.canary.success.max_failed",
        ),
    ],
)
def test_a_bad_canary_names_its_path(given: dict[str, Any], where: str) -> None:
    """Each bad value is refused at its own path, as the template check refuses it."""
    with pytest.raises(hot.TemplateError) as info:
        canary.policy(res({"canary": given}), 10)
    assert info.value.path == where


def test_min_complete_beyond_the_canary_is_refused_when_its_size_is_known() -> None:
    """min_complete 3 of a canary of 2 members: refused at the update, naming success."""
    with pytest.raises(BadRequestError) as info:
        canary.policy(res({"canary": {"count": 2, "success": {"min_complete": 3}}}), 10)
    assert info.value.where == "resources.fleet.update_policy.canary.success"


def test_the_verdict_counts_complete_and_failed_members() -> None:
    """Passed with enough complete and few enough failed; else the reason names the counts and a failure."""
    test = {"size": 2, "pause": 0.0, "min_complete": 1, "max_failed": 1}
    assert canary.verdict(test, [judged("COMPLETE"), judged("FAILED")]) is None
    why = canary.verdict({**test, "max_failed": 0}, [judged("COMPLETE"), judged("FAILED")])
    assert why == (
        "canary failed: 1 of 2 members complete (at least 1 needed), 1 failed (at most 0): member m: it is FAILED"
    )


def test_members_that_did_not_end_count_as_neither() -> None:
    """A member still running when a ResourceGroup's nested stack failed is neither complete nor failed."""
    test = {"size": 3, "pause": 0.0, "min_complete": 1, "max_failed": 1}
    why = canary.verdict(test, [judged("FAILED"), judged("IN_PROGRESS"), judged("NOT STARTED")])
    assert why == (
        "canary failed: 0 of 3 members complete (at least 1 needed), 1 failed (at most 1), "
        "2 not ended: member m: it is FAILED"
    )


def test_a_settled_member_is_left_out_of_the_queue() -> None:
    """Members given as settled (a rollback's untouched ones) do not run UPDATE again."""
    members = {k: member("COMPLETE") for k in ("m0", "m1", "m2")}
    servers = {k: "srv" for k in members}
    queue, leaving = member_queue(members, servers, servers, {"x": 1}, {"x": 2}, frozenset({"m1", "m2"}))
    assert queue == [["update", "m0"]] and leaving == []
