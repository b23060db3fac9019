"""Deployment rules without a database: results, signals, inputs, replacement."""

from __future__ import annotations

from typing import Any

import pytest

from agent import wire, wire_caps
from control.errors import StaleSignalError
from control.resources.deploy import Source, declared_inputs, replace_on_change_differs
from control.signals.result import APPLIED, DUPLICATE, LATE, apply_signal, result_status
from control.store.orm import DeploymentRow


def source(inputs: tuple[dict[str, Any], ...] = (), outputs: tuple[dict[str, Any], ...] = ()) -> Source:
    return Source(
        group="script", config="#!/bin/sh\n", inputs=inputs, outputs=outputs, options=None, name="cfg"
    )


def deployment(
    generation: int = 1,
    status: str = "IN_PROGRESS",
    outputs: list[dict[str, Any]] | None = None,
    inputs: list[dict[str, Any]] | None = None,
    item: bool = True,
    input_values: dict[str, Any] | None = None,
) -> DeploymentRow:
    """A deployment whose derived config (its `item`) declares *outputs* and carries *inputs*."""
    derived = {
        "id": "item-1",
        "name": "cfg",
        "group": "script",
        "config": "",
        "options": None,
        "outputs": outputs or [],
        "inputs": inputs or [],
    }
    return DeploymentRow(
        id="dep-1",
        server_id="srv-1",
        generation=generation,
        status=status,
        status_reason="Deploy data available",
        item=derived if item else None,
        input_values=input_values or {},
        outputs={},
        stdout="",
        stderr="",
        created_at=0.0,
        updated_at=0.0,
    )


# ------------------------------------------------------------------ result_status


def test_zero_status_completes_keeping_only_declared_outputs():
    """Exit 0 is COMPLETE "Outputs received"; signal keys the config does not declare are dropped."""
    dep = deployment(outputs=[{"name": "port", "type": "String", "error_output": False}])
    status, reason, outputs = result_status(dep, wire.Signal(0, "ok", "", {"port": "80", "junk": "x"}))
    assert ("COMPLETE", "Outputs received", {"port": "80"}) == (status, reason, outputs)


def test_non_zero_status_fails_with_heats_reason_and_keeps_outputs():
    """A non-zero status code fails with Heat's reason; declared outputs are still kept."""
    dep = deployment(outputs=[{"name": "port", "error_output": False}])
    status, reason, outputs = result_status(dep, wire.Signal(3, "", "broke", {"port": "80"}))
    assert "FAILED" == status
    assert "Deployment exited with non-zero status code: 3" == reason
    assert {"port": "80"} == outputs


def test_error_output_with_a_value_fails_with_name_and_value():
    """A declared error_output that has a value fails the deployment with `name : value`."""
    dep = deployment(outputs=[{"name": "problem", "error_output": True}])
    status, reason, _ = result_status(dep, wire.Signal(0, "", "", {"problem": "disk is full"}))
    assert ("FAILED", "problem : disk is full") == (status, reason)


def test_empty_error_output_does_not_fail():
    """An error_output signalled empty is no error: the deployment completes."""
    dep = deployment(outputs=[{"name": "problem", "error_output": True}])
    assert "COMPLETE" == result_status(dep, wire.Signal(0, "", "", {"problem": ""}))[0]


def test_undeclared_error_like_output_is_ignored():
    """An output the config does not declare cannot fail the deployment."""
    status, _, outputs = result_status(deployment(outputs=[]), wire.Signal(0, "", "", {"problem": "x"}))
    assert ("COMPLETE", {}) == (status, outputs)


# ------------------------------------------------------------------ apply_signal


def test_signal_for_current_generation_records_the_result():
    """A signal for the current generation sets status, outputs, streams, code and nonce."""
    dep = deployment(generation=2, outputs=[{"name": "out"}])
    signal = wire.Signal(0, "done\n", "warn\n", {"out": "v"}, {"nonce": "n1"})
    assert APPLIED == apply_signal(dep, 2, signal)
    assert ("COMPLETE", "Outputs received") == (dep.status, dep.status_reason)
    assert ({"out": "v"}, "done\n", "warn\n", 0, "n1") == (
        dep.outputs,
        dep.stdout,
        dep.stderr,
        dep.status_code,
        dep.signal_nonce,
    )
    assert dep.completed_at is not None


def test_failed_signal_records_failure():
    """A non-zero code recorded on the deployment makes it FAILED with the code kept."""
    dep = deployment()
    assert APPLIED == apply_signal(dep, 1, wire.Signal(7, "", "boom"))
    assert ("FAILED", 7, "boom") == (dep.status, dep.status_code, dep.stderr)


def test_signal_for_older_generation_is_stale():
    """A signal for a generation older than the current one is refused as stale (409)."""
    dep = deployment(generation=3)
    with pytest.raises(StaleSignalError, match="stale") as caught:
        apply_signal(dep, 2, wire.Signal(0))
    assert 409 == caught.value.status
    assert "IN_PROGRESS" == dep.status


def test_signal_for_unknown_future_generation_is_refused():
    """A signal naming a generation the deployment has not reached is refused (409)."""
    dep = deployment(generation=1)
    with pytest.raises(StaleSignalError, match="no generation 2"):
        apply_signal(dep, 2, wire.Signal(0))
    assert "IN_PROGRESS" == dep.status


def test_duplicate_signal_changes_nothing():
    """A repeat for a generation already recorded is a DUPLICATE and keeps the first result."""
    dep = deployment()
    assert APPLIED == apply_signal(dep, 1, wire.Signal(0, "first", ""))
    assert DUPLICATE == apply_signal(dep, 1, wire.Signal(5, "second", ""))
    assert ("COMPLETE", "first", 0) == (dep.status, dep.stdout, dep.status_code)


def test_huge_streams_are_trimmed():
    """stdout over the cap is stored with its head and tail and a mark where it was cut."""
    dep = deployment()
    big = "h" * wire_caps.MAX_STREAM_BYTES + "TAIL"
    apply_signal(dep, 1, wire.Signal(0, big, ""))
    assert len(dep.stdout.encode()) < len(big) + 100
    assert dep.stdout.startswith("hhh") and dep.stdout.endswith("TAIL") and "bytes cut" in dep.stdout


def test_a_result_after_the_timeout_keeps_its_output_and_stays_failed():
    """A timed-out generation's late result is kept (output, code, reason noted) once; FAILED stays."""
    dep = deployment(status="FAILED")
    dep.status_reason = "timed out after 2 s; no progress received"  # and no result: status_code unset
    assert LATE == apply_signal(dep, 1, wire.Signal(143, "slow step\n", "stopped", {}, {"nonce": "n"}))
    assert ("FAILED", "slow step\n", 143) == (dep.status, dep.stdout, dep.status_code)
    assert dep.status_reason.endswith("; the agent's late result: status code 143")
    assert DUPLICATE == apply_signal(dep, 1, wire.Signal(0, "again", ""))
    assert "slow step\n" == dep.stdout


def test_a_late_result_for_a_failure_that_had_its_result_is_a_duplicate():
    """A FAILED generation that got its own result (not timed out) is never overwritten."""
    dep = deployment()
    apply_signal(dep, 1, wire.Signal(3, "own", ""))
    assert DUPLICATE == apply_signal(dep, 1, wire.Signal(0, "other", ""))
    assert ("own", 3) == (dep.stdout, dep.status_code)


# ------------------------------------------------------------------ declared_inputs


def test_declared_inputs_take_values_then_defaults():
    """Declared inputs get the given value, else their default, keeping type and flags."""
    src = source(
        inputs=(
            {"name": "VERSION", "type": "String", "replace_on_change": True, "description": "which"},
            {"name": "PORT", "type": "Number", "default": 80},
            {"name": "EMPTY"},
        )
    )
    items = declared_inputs(src, {"VERSION": "v2"})
    assert [("VERSION", "v2", "String"), ("PORT", 80, "Number"), ("EMPTY", None, "String")] == [
        (i.name, i.value, i.type) for i in items
    ]
    assert items[0].replace_on_change and items[0].description == "which"
    assert 80 == items[1].default and not items[1].replace_on_change


def test_given_value_beats_default():
    """A value given for a declared input replaces its default."""
    (item,) = declared_inputs(
        source(inputs=({"name": "PORT", "type": "Number", "default": 80},)), {"PORT": 8080}
    )
    assert 8080 == item.value


def test_undeclared_values_follow_as_strings():
    """Values the config does not declare come after the declared ones, typed String."""
    values = {"EXTRA": {"a": 1}, "A": "x", "MORE": 2}
    items = declared_inputs(source(inputs=({"name": "A"},)), values)
    assert [("A", "x", "String"), ("EXTRA", {"a": 1}, "String"), ("MORE", 2, "String")] == [
        (i.name, i.value, i.type) for i in items
    ]
    assert {"EXTRA": {"a": 1}, "A": "x", "MORE": 2} == values  # the caller's mapping is left alone


# ------------------------------------------------------------------ replace_on_change_differs

VERSIONED = source(inputs=({"name": "VERSION", "replace_on_change": True}, {"name": "MESSAGE"}))


def on_server(**values: Any) -> DeploymentRow:
    """A deployment whose derived config on the server carries *values*."""
    return deployment(
        inputs=[{"name": k, "type": "String", "value": v} for k, v in values.items()],
        input_values=dict(values),
    )


def test_changed_replace_on_change_input_means_replace():
    """A replace_on_change input getting a new value asks for a replacement, naming the input."""
    assert "VERSION" == replace_on_change_differs(
        on_server(VERSION="v1", MESSAGE="m"), VERSIONED, {"VERSION": "v2", "MESSAGE": "m"}
    )


def test_same_replace_on_change_value_means_update():
    """Only other inputs changing is an update in place."""
    assert (
        replace_on_change_differs(
            on_server(VERSION="v1", MESSAGE="m"), VERSIONED, {"VERSION": "v1", "MESSAGE": "new"}
        )
        is None
    )


def test_replace_on_change_input_falling_back_to_its_default_is_compared_by_value():
    """A value given before and now left to an equal default does not replace."""
    src = source(inputs=({"name": "VERSION", "replace_on_change": True, "default": "v1"},))
    assert replace_on_change_differs(on_server(VERSION="v1"), src, {}) is None
    assert replace_on_change_differs(on_server(VERSION="v0"), src, {}) == "VERSION"


def test_never_deployed_deployment_keeping_its_values_is_not_replaced():
    """A deployment that never ran (CREATE not in its actions) keeping its values is updated, not replaced."""
    dep = deployment(item=False, input_values={"VERSION": "v1", "MESSAGE": "m"})
    assert replace_on_change_differs(dep, VERSIONED, {"VERSION": "v1", "MESSAGE": "new"}) is None
