"""Transport helpers without a store: names, lifetimes, refresh points, signal file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import AgentConfig
from agent.errors import EnrolError
from agent.ledger import Ledger
from agent.transports import adopt_enrolment, backoff, via
from agent.transports import file as agent_file
from control.errors import BadRequestError
from control.signal_import import name_of
from control.transports import MAX_URL_LIFETIME, Lifetimes, normalize, parse_signal_name, signal_name


def test_heat_and_own_transport_names():
    assert "HTTP" == normalize("POLL_SERVER_CFN", "t")
    assert "HTTP" == normalize("poll_server_heat", "t")
    assert "SWIFT" == normalize("POLL_TEMP_URL", "t")
    assert "S3" == normalize("S3", "t")
    with pytest.raises(BadRequestError) as err:
        normalize("ZAQAR_MESSAGE", "resources.box.properties.software_config_transport")
    assert "ZAQAR_MESSAGE" in str(err.value)
    assert "software_config_transport" == err.value.where.split(".")[-1]


def test_signal_names_round_trip():
    assert ("d-1", 3) == parse_signal_name(signal_name("d-1", 3))
    for bad in ("d-1", "d-1/x", "a/b/3", "/3", "d-1/"):
        assert parse_signal_name(bad) is None
    assert "d-1.3.json" == agent_file.file_name("d-1/3")
    assert "d-1/3" == name_of(Path("d-1.3.json"))
    assert agent_file.file_name("../x/3") is None
    assert name_of(Path("a.b.c.json")) is None


def test_lifetimes_are_bounded_and_refreshed_before_the_store_sees_them_expire():
    skewed = Lifetimes(need=300, margin=900)
    assert 1200 == skewed.total
    issued = 10_000.0
    expires = issued + skewed.total
    # The control plane 15 min behind the store: the store sees only `need` seconds of life.
    assert not skewed.due(expires, issued + 100)
    assert skewed.due(expires, issued + 151)
    huge = Lifetimes(need=30 * 86400, margin=900)
    assert MAX_URL_LIFETIME == huge.total
    assert not huge.due(issued + huge.total, issued + 86400)
    assert huge.due(issued + huge.total, issued + 4 * 86400)


def test_relay_routing_rewrites_only_control_plane_urls():
    cfg = AgentConfig(
        url="http://10.9.0.1:9000",
        server_id="s",
        name="n",
        credential="c",
        document_url="http://127.0.0.1:8770/v1/agent/document",
        heartbeat_url="http://127.0.0.1:8770/v1/agent/heartbeat",
    )
    assert "http://10.9.0.1:9000/v1/signal/d/1?sig=x" == via(cfg, "http://127.0.0.1:8770/v1/signal/d/1?sig=x")
    assert "http://swift:8080/v1/AUTH_t/c/o" == via(cfg, "http://swift:8080/v1/AUTH_t/c/o")
    direct = AgentConfig(**{**cfg.__dict__, "url": "http://127.0.0.1:8770"})
    assert "http://127.0.0.1:8770/v1/signal/d/1" == via(direct, "http://127.0.0.1:8770/v1/signal/d/1")


def test_enrolment_answer_with_a_bad_transport_is_refused(tmp_path: Path):
    """An answer naming an unknown transport fails enrolment with a message naming the field."""
    ledger = Ledger(tmp_path)
    try:
        with pytest.raises(EnrolError, match="transport must be an object whose kind is one of HTTP"):
            adopt_enrolment(ledger, {"kind": "CARRIER-PIGEON"})
        assert "HTTP" == adopt_enrolment(ledger, None)  # an older control plane: stays where it enrolled
        assert "" == (ledger.get_state("transport") or "")
    finally:
        ledger.close()


def test_backoff_doubles_with_jitter_then_holds_at_the_cap():
    """R09: below the cap 2 s doubling with jitter; at the cap exactly the cap (rate <= N / cap)."""
    for failures in range(1, 6):
        waits = [backoff(failures, 60.0) for _ in range(200)]
        assert 2**failures * 0.5 <= min(waits) and max(waits) <= 2**failures
    assert {60.0} == {backoff(f, 60.0) for f in (6, 7, 20, 10_000)}


def test_backoff_never_polls_a_failing_source_sooner_than_a_working_one():
    """R09: with a poll interval the first wait is 1-2 intervals, then doubling, then the cap."""
    for failures in range(1, 4):
        waits = [backoff(failures, 1000.0, 5.0) for _ in range(200)]
        assert 5.0 * 2 ** (failures - 1) <= min(waits) and max(waits) <= 10.0 * 2 ** (failures - 1)
    # 30 s polls, a 60 s cap: the first failure already waits the whole cap (one request per cap).
    assert {60.0} == {backoff(f, 60.0, 30.0) for f in (1, 2, 50)}


def test_serve_transport_options_read_flags_and_environment(monkeypatch: pytest.MonkeyPatch):
    """Flags win, keys come from the environment, floats are converted, unset ones stay out."""
    import argparse

    from control import transport_options

    monkeypatch.setenv("ANNEAL_SWIFT_KEY", "from-env")
    monkeypatch.setenv("ANNEAL_STORE_PREFIX", "env-prefix")
    p = argparse.ArgumentParser()
    transport_options.add(p)
    args = p.parse_args(
        ["--store-prefix", "flag-prefix", "--store-url-lifetime", "60", "--swift-key-rotation=120"]
    )
    assert {
        "swift_key": "from-env",
        "store_prefix": "flag-prefix",
        "store_url_lifetime": 60.0,
        "swift_key_rotation": 120.0,
    } == transport_options.settings(args)
    with pytest.raises(SystemExit):
        p.parse_args(["--store-clock-margin", "soon"])
