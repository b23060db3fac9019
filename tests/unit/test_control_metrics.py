"""The control plane's metrics registry: one per process object, zero-filled fleet gauges, the docs' names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import metrics as agent_metrics
from control.metrics import FleetCounts, Metrics, families
from control.settings import Settings, metrics_listen_problem

DOCS = Path(__file__).resolve().parents[2] / "docs"


def values(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(metrics.exposition().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_two_runtimes_count_apart():
    """Each Metrics has its own registry: what one process object counts, another does not see."""
    one, two = Metrics(), Metrics()
    one.documents_published.inc(3)
    assert 3 == values(one)[("anneal_documents_published_total", ())]
    assert 0 == values(two)[("anneal_documents_published_total", ())]


def test_fleet_gauges_show_zero_for_statuses_not_seen():
    """A group's IN_PROGRESS and FAILED show 0 (not vanish), and every agent state is present."""
    metrics = Metrics()
    metrics.fleet.counts = FleetCounts(
        deployments={("COMPLETE", "script"): 4}, agents={"alive": 2}, stacks={("CREATE", "COMPLETE"): 1}
    )
    found = values(metrics)
    assert 4 == found[("anneal_deployments", (("group", "script"), ("status", "COMPLETE")))]
    assert 0 == found[("anneal_deployments", (("group", "script"), ("status", "IN_PROGRESS")))]
    assert 0 == found[("anneal_deployments", (("group", "script"), ("status", "FAILED")))]
    assert 2 == found[("anneal_agents", (("state", "alive"),))]
    assert 0 == found[("anneal_agents", (("state", "silent"),))]
    assert 1 == found[("anneal_stacks", (("action", "CREATE"), ("status", "COMPLETE")))]


def test_fleet_gauges_say_to_aggregate_with_max():
    """The fleet-wide gauges' HELP tells dashboards not to sum them across processes."""
    text = Metrics().exposition().decode()
    for name in ("anneal_deployments", "anneal_agents", "anneal_stacks"):
        (help_line,) = [line for line in text.splitlines() if line.startswith(f"# HELP {name} ")]
        assert "max()" in help_line


def test_the_grafana_dashboard_uses_only_metrics_that_exist():
    """Every anneal_* name in docs/grafana-dashboard.json is a family of the control plane's or the
    agent's metrics (or its _bucket/_count/_sum)."""
    agent_view = {"document": {"serial": 1, "age_seconds": 2.0}, "rejections": {"counts": {"serial": 1}}}
    agent_families = {f.name for f in text_string_to_metric_families(agent_metrics.exposition(agent_view))}
    known = set(families(Metrics())) | agent_families
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert exprs
    used = {name for expr in exprs for name in re.findall(r"\banneal_[a-z_]+", expr)}
    unknown = {
        n for n in used if re.sub(r"_(bucket|count|sum|total)$", "", n) not in known and n not in known
    }
    assert set() == unknown


@pytest.mark.parametrize(
    ("listen", "public", "problem"),
    [
        ("", False, None),
        ("127.0.0.1:9108", False, None),
        ("[::1]:9108", False, None),
        ("localhost:9108", False, None),
        ("0.0.0.0:9108", False, "not a loopback address"),
        ("0.0.0.0:9108", True, None),
        ("127.0.0.1:port", False, "expected HOST:PORT"),
    ],
)
def test_metrics_listen_stays_on_loopback_unless_allowed(listen, public, problem):
    """--metrics-listen asks no token: off loopback it is refused unless --metrics-public, naming both."""
    found = metrics_listen_problem(
        Settings(Path("/nonexistent"), metrics_listen=listen, metrics_public=public)
    )
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and "--metrics-listen" in found
