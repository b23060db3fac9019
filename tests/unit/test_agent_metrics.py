"""The agent's hand-written Prometheus exposition, read back by Prometheus's own parser."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.metrics import check_listen, exposition, family

VIEW: dict[str, Any] = {
    "mode": "anneal",
    "server_id": "5c0b",
    "transport": {"kind": "HTTP long-poll", "document_url": "http://cp:8770/v1/agent/document"},
    "document": {"serial": 14, "received_at": 1.0, "age_seconds": 3.5},
    "document_policy": "signed",
    "generations": {"signalled": 2, "finished": 1},
    "queued_signals": [{"attempts": 4}, {"attempts": 1}],
    "rejections": {"counts": {"signature": 3}, "last": []},
    "frozen": False,
    "disk_full": None,
}


def parsed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_exposition_carries_the_status_views_values():
    """Serial, generations by state, queued signals, refusals and age come out as the view says."""
    found = parsed(exposition(VIEW))
    assert 14 == found[("anneal_agent_document_serial", ())]
    assert 2 == found[("anneal_agent_generations", (("state", "signalled"),))]
    assert 1 == found[("anneal_agent_generations", (("state", "finished"),))]
    assert 2 == found[("anneal_agent_signals_queued", ())]
    assert 4 == found[("anneal_agent_signal_attempts_max", ())]
    assert 3 == found[("anneal_agent_documents_refused_total", (("kind", "signature"),))]
    assert 3.5 == found[("anneal_agent_document_age_seconds", ())]
    assert 0 == found[("anneal_agent_document_frozen", ())]
    assert 0 == found[("anneal_agent_disk_full", ())]
    info = (("mode", "anneal"), ("policy", "signed"), ("server_id", "5c0b"), ("transport", "HTTP long-poll"))
    assert 1 == found[("anneal_agent_info", info)]


def test_exposition_of_an_agent_that_never_had_a_document_leaves_its_age_out():
    """No document yet: serial 0, no age sample, and the empty view still parses."""
    found = parsed(exposition({"document": {"serial": 0, "age_seconds": None}}))
    assert 0 == found[("anneal_agent_document_serial", ())]
    assert not any(name == "anneal_agent_document_age_seconds" for name, _ in found)


def test_label_values_and_help_are_escaped():
    """A quote, a backslash and a line break in a label value or help text survive the round trip."""
    odd = 'a"b\\c\nd'
    text = family("x_thing", "gauge", "help with \\ and\nbreak", [({"v": odd}, 2.5)])
    (fam,) = text_string_to_metric_families(text)
    assert "help with \\ and\nbreak" == fam.documentation
    assert [({"v": odd}, 2.5)] == [(s.labels, s.value) for s in fam.samples]


@pytest.mark.parametrize(
    ("listen", "expected"),
    [("127.0.0.1:9100", ("127.0.0.1", 9100)), ("[::1]:9100", ("::1", 9100)), (":9100", ("127.0.0.1", 9100))],
)
def test_loopback_metrics_addresses_are_taken(listen, expected):
    """Loopback addresses, IPv6 in brackets, and a bare :PORT (loopback) are accepted."""
    assert expected == check_listen(listen, public=False)


@pytest.mark.parametrize("listen", ["0.0.0.0:9100", "10.0.0.5:9100", "example.org:9100"])
def test_a_metrics_address_off_loopback_is_refused_unless_public(listen):
    """Any other host is refused, naming --metrics-public; with it the address is taken."""
    with pytest.raises(ValueError, match="--metrics-public"):
        check_listen(listen, public=False)
    assert 9100 == check_listen(listen, public=True)[1]


@pytest.mark.parametrize("listen", ["127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_metrics_address_without_a_port_is_refused(listen):
    """HOST:PORT needs a port number from 1 to 65535."""
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        check_listen(listen, public=False)
