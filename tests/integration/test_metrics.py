"""Prometheus metrics: /metrics scraped from a real control plane after a real agent ran a stack."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.controlplane import ControlPlane, serve_once, start_control_plane, stop_control_plane
from tests.support.processes import free_port
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

SIGNAL_ROUTE = "/v1/signal/{deployment_id}/{generation}"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def metrics_plane(tmp_path: Path, db_args: list[str]) -> Iterator[tuple[ControlPlane, int, int]]:
    """A control plane with --metrics-listen on a loopback port, on SQLite and on PostgreSQL;
    its local agent (one server) serves its own metrics on another loopback port."""
    port, agent_port = free_port(), free_port()
    cp = start_control_plane(
        tmp_path,
        *db_args,
        "--metrics-listen",
        f"127.0.0.1:{port}",
        f"--agent-arg=--metrics-listen=127.0.0.1:{agent_port}",
    )
    yield cp, port, agent_port
    stop_control_plane(cp)


def scrape(url: str, token: str | None = None) -> tuple[int, str, str]:
    """(status, content type, body) of GET *url*, with a bearer *token* if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def samples(text: str) -> Samples:
    """Every sample of an exposition, by (name, labels), parsed by Prometheus's own parser."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def total(found: Samples, name: str, **labels: str) -> float:
    """The sum of *name*'s samples whose labels include *labels*."""
    want = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and want <= ls)


def test_metrics_count_the_stack_that_just_ran(metrics_plane: tuple[ControlPlane, int, int]) -> None:
    """After a stack's deployment completes, /metrics shows it (gauges, signals, durations, requests),
    and so does its agent's own metrics port."""
    cp, port, agent_port = metrics_plane
    assert 201 == cp.create("m", one_script_deployment("#!/bin/sh\necho hello\n")).status
    assert "CREATE_COMPLETE" == cp.wait_stack("m")["status"]
    deployments = cp.api("GET", "/v1/deployments?stack=m").body
    complete = sum(1 for d in deployments if d["status"] == "COMPLETE")
    assert complete == len(deployments) == 1
    forged = cp.api("POST", f"/v1/signal/{deployments[0]['id']}/1?sig=forged", {}, token=None)
    assert 403 == forged.status

    status, content_type, text = scrape(f"{cp.url}/metrics", cp.token)
    assert 200 == status
    assert content_type.startswith("text/plain; version=0.0.4")
    found = samples(text)
    assert complete == total(found, "anneal_deployments", status="COMPLETE", group="script")
    assert 0 == total(found, "anneal_deployments", status="IN_PROGRESS")
    assert 1 == total(found, "anneal_stacks", action="CREATE", status="COMPLETE")
    assert 1 == total(found, "anneal_agents", state="alive")
    assert total(found, "anneal_signals_received_total", outcome="applied") >= complete
    assert 1 == total(found, "anneal_signals_refused_total", reason="forbidden")
    assert complete == total(
        found, "anneal_deployment_duration_seconds_count", status="COMPLETE", group="script"
    )
    assert complete == total(found, "anneal_publish_to_signal_seconds_count", group="script")
    assert total(found, "anneal_http_requests_total", route=SIGNAL_ROUTE, method="POST", status="200") > 0
    assert total(found, "anneal_http_request_duration_seconds_count", route=SIGNAL_ROUTE) > 0
    assert total(found, "anneal_documents_published_total") >= 2  # the server's first, then its deployment's
    assert total(found, "anneal_engine_step_seconds_count", outcome="settled") >= 1

    # The loopback metrics port answers without a token, with the same fleet-wide values.
    status, _, open_text = scrape(f"http://127.0.0.1:{port}/metrics")
    assert 200 == status
    assert complete == total(samples(open_text), "anneal_deployments", status="COMPLETE")
    check_agent_metrics(cp, agent_port)


def check_agent_metrics(cp: ControlPlane, agent_port: int) -> None:
    """The agent's loopback port shows its server, the signalled generation, an empty outbox."""
    (server,) = cp.api("GET", "/v1/servers").body
    url = f"http://127.0.0.1:{agent_port}/metrics"

    def signalled() -> Samples | None:  # the agent marks it once the control plane's answer is in
        found = samples(scrape(url)[2])
        return found if total(found, "anneal_agent_generations", state="signalled") == 1 else None

    found = wait_until(signalled, "the agent's metrics never showed the generation signalled", 30)
    assert 1 == total(found, "anneal_agent_info", server_id=server["id"], policy="signed")
    assert 0 == total(found, "anneal_agent_signals_queued")
    assert 1 <= total(found, "anneal_agent_document_serial") <= server["serial"]
    status, content_type, _ = scrape(f"http://127.0.0.1:{agent_port}/other")
    assert (404, "text/plain") == (status, content_type)


def test_metrics_need_a_token_on_the_main_port(control_plane: ControlPlane) -> None:
    """/metrics on the main port: 401 without a token or with a wrong one; the metrics token opens it."""
    cp = control_plane
    status, content_type, body = scrape(f"{cp.url}/metrics")
    assert (401, "application/json") == (status, content_type.split(";")[0])
    assert "metrics token" in body
    assert 401 == scrape(f"{cp.url}/metrics", "t" + "x" * 43)[0]
    metrics_token = (cp.data_dir / "metrics-token").read_text().strip()
    assert metrics_token != cp.token
    status, _, text = scrape(f"{cp.url}/metrics", metrics_token)
    assert 200 == status
    assert "anneal_http_requests_total" in text
    # The metrics token opens /metrics only: the operator's routes still want the admin token.
    assert 401 == cp.api("GET", "/v1/stacks", token=metrics_token).status


def test_a_metrics_port_off_loopback_is_refused(tmp_path: Path) -> None:
    """--metrics-listen on a non-loopback address is refused at start, naming the flag that allows it."""
    done = serve_once(tmp_path, "--metrics-listen", f"0.0.0.0:{free_port()}")
    assert 2 == done.returncode
    assert "--metrics-listen" in done.stderr
    assert "not a loopback address" in done.stderr
    assert "--metrics-public" in done.stderr
