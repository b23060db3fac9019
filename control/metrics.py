"""The control plane's Prometheus metrics: one registry per Runtime, never the global one.

Counters, histograms and the long-poll gauge count what *this process* did: a fleet
of processes on one database is scraped process by process and summed (``sum()``).
The ``fleet`` gauges (deployments, agents, stacks) are read from the database at
scrape time, so every process reports the same fleet-wide values: aggregate them
with ``max()``, never ``sum()`` (docs/operations.md, "Metrics").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

#: Seconds buckets for deployments: a hook runs for a second or for an hour.
DEPLOYMENT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: Seconds buckets for requests: most answer in milliseconds, long-polls hold up to a minute.
REQUEST_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Every name here is a classic one, so the exposition is the 0.0.4 text format every Prometheus reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
FLEET = "fleet-wide, read from the database at scrape time: every process reports the same value, aggregate with max()"
#: The statuses shown even at zero, so that a series drops to 0 instead of vanishing.
DEPLOYMENT_STATUSES = ("IN_PROGRESS", "COMPLETE", "FAILED")
AGENT_STATES = ("alive", "silent", "not_enrolled")


@dataclass
class FleetCounts:
    """What the database held at the last scrape, as label tuples -> count."""

    #: (status, hook group) -> deployments.
    deployments: dict[tuple[str, str], int] = field(default_factory=dict)
    #: alive / silent / not_enrolled -> servers.
    agents: dict[str, int] = field(default_factory=dict)
    #: (action, status) -> top-level stacks.
    stacks: dict[tuple[str, str], int] = field(default_factory=dict)


class FleetCollector(Collector):
    """Yields the last FleetCounts; the /metrics handler refreshes them from the database first."""

    def __init__(self) -> None:
        self.counts = FleetCounts()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = self.counts
        deployments = GaugeMetricFamily(
            "anneal_deployments",
            f"Deployments by status and hook group ({FLEET}).",
            labels=["status", "group"],
        )
        groups = {group for _, group in counts.deployments}
        for status, group in sorted(
            {(s, g) for s in DEPLOYMENT_STATUSES for g in groups} | set(counts.deployments)
        ):
            deployments.add_metric([status, group], counts.deployments.get((status, group), 0))
        yield deployments
        agents = GaugeMetricFamily(
            "anneal_agents",
            f"Servers by agent state: alive (heard within the heartbeat lease), silent, not_enrolled ({FLEET}).",
            labels=["state"],
        )
        for state in sorted({*AGENT_STATES, *counts.agents}):
            agents.add_metric([state], counts.agents.get(state, 0))
        yield agents
        stacks = GaugeMetricFamily(
            "anneal_stacks", f"Top-level stacks by action and status ({FLEET}).", labels=["action", "status"]
        )
        for (action, status), n in sorted(counts.stacks.items()):
            stacks.add_metric([action, status], n)
        yield stacks


class Metrics:
    """Every instrument of one control-plane process, in its own registry."""

    def __init__(self) -> None:
        # No `_created` series: they double what a scrape carries and no dashboard here reads them.
        # The switch is the library's, process-wide; every registry of the control plane wants it off.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
        self.registry = CollectorRegistry(auto_describe=True)
        self.fleet = FleetCollector()
        self.registry.register(self.fleet)
        r = self.registry
        self.deployment_seconds = Histogram(
            "anneal_deployment_duration_seconds",
            "From a deployment generation's start to its result (signal, timeout or cancel), by outcome.",
            ["status", "group"],
            buckets=DEPLOYMENT_BUCKETS,
            registry=r,
        )
        self.publish_to_signal = Histogram(
            "anneal_publish_to_signal_seconds",
            "From the document carrying a generation to its result signal's arrival (the hook's run included).",
            ["group"],
            buckets=DEPLOYMENT_BUCKETS,
            registry=r,
        )
        self.documents_published = Counter(
            "anneal_documents_published",
            "Signed documents handed to the publisher by this process.",
            registry=r,
        )
        self.long_polls = Gauge(
            "anneal_long_polls_held", "Agent document long-polls this process holds open now.", registry=r
        )
        self.signals_received = Counter(
            "anneal_signals_received",
            "Signals taken by this process, by outcome: applied, duplicate, progress.",
            ["outcome"],
            registry=r,
        )
        self.signals_refused = Counter(
            "anneal_signals_refused",
            "Signals refused by this process, by reason (the error code of the answer).",
            ["reason"],
            registry=r,
        )
        self.engine_step_seconds = Histogram(
            "anneal_engine_step_seconds",
            "Engine steps of this process and their duration, by outcome: settled, waiting, raced, lease_lost, interrupted, failed.",
            ["outcome"],
            registry=r,
        )
        self.lease_losses = Counter(
            "anneal_work_lease_losses", "Stack work leases this process lost to another process.", registry=r
        )
        self.database_errors = Counter(
            "anneal_database_errors",
            "Database errors met by this process, by where (api, engine) and the error's class.",
            ["where", "kind"],
            registry=r,
        )
        self.requests = Counter(
            "anneal_http_requests",
            "HTTP requests answered by this process, by route template, method and status.",
            ["route", "method", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "anneal_http_request_duration_seconds",
            "Time to answer an HTTP request (long-polls included), by route template and method.",
            ["route", "method"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )

    def deployment_finished(self, status: str, group: str, started_at: float | None, ended_at: float) -> None:
        """A generation ended (its result committed, or it timed out or was cancelled)."""
        if started_at is not None:
            self.deployment_seconds.labels(status, group).observe(max(ended_at - started_at, 0.0))

    def database_error(self, where: str, error: BaseException) -> None:
        self.database_errors.labels(where, type(error).__name__).inc()

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format (version 0.0.4)."""
        return generate_latest(self.registry)


def group_of(item: object) -> str:
    """A deployment item's hook group (a label of the deployment metrics)."""
    return str(item.get("group", "")) if isinstance(item, dict) else ""


def families(metrics: Metrics) -> Iterable[str]:
    """The metric family names this registry exposes (for the docs check)."""
    return sorted({m.name for m in metrics.registry.collect()})
