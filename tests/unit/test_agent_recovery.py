"""What the agent decides, on start, for a generation a crash left started: re-run or report FAILED."""

from __future__ import annotations

from pathlib import Path

from agent import recovery, wire
from agent.ledger import Ledger
from agent.output import output_paths, stdout_copy_path


def _interrupted(state_dir: Path, item_id: str) -> Ledger:
    ledger = Ledger(state_dir)
    row = {
        "item_id": item_id,
        "deployment_id": "d",
        "generation": 1,
        "name": "web",
        "hash": "",
        "action": "CREATE",
    }
    ledger.accept_document(1, b"{}", [row])
    ledger.mark_started(item_id)
    return ledger


def test_an_interrupted_run_is_reported_failed_with_what_it_had_printed(tmp_path: Path) -> None:
    """No rerun_on_interrupt: FAILED (137) with the tool's stdout copy and the hook's stderr so far."""
    ledger = _interrupted(tmp_path, "g1")
    _, err = output_paths(tmp_path, "g1")
    err.write_text("step 1 done\n")
    stdout_copy_path(tmp_path, "g1").write_text("tool says hi\n")
    item = wire.DeploymentItem(id="g1", name="web", group="script", creation_time="")

    decisions = recovery.recover(ledger, tmp_path, lambda item_id: (item, None))

    assert [recovery.Report] == [type(d) for d in decisions]
    report = decisions[0]
    assert isinstance(report, recovery.Report)
    assert (recovery.INTERRUPTED_CODE, "tool says hi\n") == (report.signal.status_code, report.signal.stdout)
    assert report.signal.stderr.startswith(recovery.INTERRUPTED) and "step 1 done" in report.signal.stderr
    assert "started" == ledger.entries()[0].state  # the decision is the loop's to act on
    ledger.close()


def test_an_interrupted_run_that_allows_it_runs_again(tmp_path: Path) -> None:
    """rerun_on_interrupt: true sends the generation back to `received`, counting the runs."""
    ledger = _interrupted(tmp_path, "g1")
    item = wire.DeploymentItem(
        id="g1", name="web", group="script", creation_time="", options={"rerun_on_interrupt": True}
    )

    decisions = recovery.recover(ledger, tmp_path, lambda item_id: (item, None))

    assert [recovery.Rerun("g1", f"{recovery.INTERRUPTED}; re-run (run 1)")] == decisions
    ledger.close()


def test_an_interrupted_attempt_runs_again_when_its_retry_policy_names_interrupted(tmp_path: Path) -> None:
    """retry_on [interrupted] with retries left: re-run; with the retries spent: reported FAILED."""
    item = wire.DeploymentItem(id="g1", name="web", group="script", creation_time="")
    meta = wire.ItemMeta("d", 1, "", "CREATE", retry={"retries": 2, "retry_on": ["interrupted"]})
    for runs, expected in ((2, recovery.Rerun), (3, recovery.Report)):
        (tmp_path / str(runs)).mkdir()
        ledger = _interrupted(tmp_path / str(runs), "g1")
        ledger.set_state("runs:g1", str(runs))
        decisions = recovery.recover(ledger, tmp_path / str(runs), lambda item_id: (item, meta))
        assert [expected] == [type(d) for d in decisions], runs
        ledger.close()
