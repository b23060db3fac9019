"""Transport helpers without a store: names, lifetimes, refresh points, signal file names."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent import keys
from agent.config import AgentConfig
from agent.errors import EnrolError
from agent.ledger import Ledger, Outgoing
from agent.transports import file as agent_file
from agent.transports import offline
from agent.transports.switch import AgentTransport, adopt_enrolment, backoff, via
from control.cli.signal_import import name_of
from control.errors import BadRequestError
from control.hot.types import CONFIG_TRANSPORTS
from control.transports.publisher import Transports, normalize
from control.transports.relay import RelayStore
from control.transports.store import MAX_URL_LIFETIME, Lifetimes, parse_signal_name, signal_name


def test_heat_and_own_transport_names():
    """Heat's transport names map to ours; an unsupported one is refused naming the field."""
    assert "HTTP" == normalize("POLL_SERVER_CFN", "t")
    assert "HTTP" == normalize("poll_server_heat", "t")
    assert "SWIFT" == normalize("POLL_TEMP_URL", "t")
    assert "S3" == normalize("S3", "t")
    assert "HTTP" == normalize("ZAQAR_MESSAGE", "t")  # no Zaqar here: served as POLL_SERVER_HEAT
    with pytest.raises(BadRequestError) as err:
        normalize("PIGEON_POST", "resources.box.properties.software_config_transport")
    assert "PIGEON_POST" in str(err.value)
    where = err.value.where
    assert where is not None and "software_config_transport" == where.split(".")[-1]


def test_signal_names_round_trip():
    """Signal object and file names round-trip; malformed or path-escaping names give None."""
    assert ("d-1", 3) == parse_signal_name(signal_name("d-1", 3))
    for bad in ("d-1", "d-1/x", "a/b/3", "/3", "d-1/"):
        assert parse_signal_name(bad) is None
    assert "d-1.3.json" == agent_file.file_name("d-1/3")
    assert "d-1/3" == name_of(Path("d-1.3.json"))
    assert agent_file.file_name("../x/3") is None
    assert name_of(Path("a.b.c.json")) is None


def test_lifetimes_are_bounded_and_refreshed_before_the_store_sees_them_expire():
    """A URL lives need + skew margin (capped) and is refreshed before a store 15 min ahead sees it expire."""
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


def agent_config(url: str) -> AgentConfig:
    """An agent of the control plane at 127.0.0.1:8770 that enrolled through *url*."""
    return AgentConfig(
        url=url,
        server_id="s",
        name="n",
        credential="c",
        document_url="http://127.0.0.1:8770/v1/agent/document",
        heartbeat_url="http://127.0.0.1:8770/v1/agent/heartbeat",
    )


def test_relay_routing_rewrites_only_control_plane_urls():
    """With a relay, control-plane URLs go through it and store URLs stay direct; without one, none change."""
    cfg = agent_config("http://10.9.0.1:9000")
    assert "http://10.9.0.1:9000/v1/signal/d/1?sig=x" == via(cfg, "http://127.0.0.1:8770/v1/signal/d/1?sig=x")
    assert "http://swift:8080/v1/AUTH_t/c/o" == via(cfg, "http://swift:8080/v1/AUTH_t/c/o")
    direct = AgentConfig(**{**cfg.__dict__, "url": "http://127.0.0.1:8770"})
    assert "http://127.0.0.1:8770/v1/signal/d/1" == via(direct, "http://127.0.0.1:8770/v1/signal/d/1")


def test_enrolment_answer_with_a_bad_transport_is_refused(tmp_path: Path) -> None:
    """An answer naming an unknown transport fails enrolment with a message naming the field."""
    ledger = Ledger(tmp_path)
    try:
        with pytest.raises(EnrolError, match="transport must be an object whose kind is one of HTTP"):
            adopt_enrolment(ledger, {"kind": "CARRIER-PIGEON"})
        assert "HTTP" == adopt_enrolment(ledger, None)  # an older control plane: stays where it enrolled
        assert "" == (ledger.get_state("transport") or "")
    finally:
        ledger.close()


@pytest.mark.catalogue("R09")
def test_backoff_doubles_with_jitter_then_holds_at_the_cap():
    """R09: below the cap 2 s doubling with jitter; at the cap exactly the cap (rate <= N / cap)."""
    for failures in range(1, 6):
        waits = [backoff(failures, 60.0) for _ in range(200)]
        assert 2**failures * 0.5 <= min(waits) and max(waits) <= 2**failures
    assert {60.0} == {backoff(f, 60.0) for f in (6, 7, 20, 10_000)}


@pytest.mark.catalogue("R09")
def test_backoff_never_polls_a_failing_source_sooner_than_a_working_one():
    """R09: with a poll interval the first wait is 1-2 intervals, then doubling, then the cap."""
    for failures in range(1, 4):
        waits = [backoff(failures, 1000.0, 5.0) for _ in range(200)]
        assert 5.0 * 2 ** (failures - 1) <= min(waits) and max(waits) <= 10.0 * 2 ** (failures - 1)
    # 30 s polls, a 60 s cap: the first failure already waits the whole cap (one request per cap).
    assert {60.0} == {backoff(f, 60.0, 30.0) for f in (1, 2, 50)}


def test_serve_transport_options_read_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flags win, keys come from the environment, floats are converted, unset ones stay out."""
    import argparse

    from control.cli import transport_options

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


def test_relay_transport_routes_to_the_named_relay_and_gives_the_credential_only_there(
    tmp_path: Path,
) -> None:
    """RELAY: control-plane URLs go to the relay the document names; the bearer only to it or the plane."""
    cfg = agent_config("http://127.0.0.1:8770")
    ledger = Ledger(tmp_path)
    try:
        assert "RELAY" == adopt_enrolment(ledger, {"kind": "RELAY", "url": "http://10.9.0.1:9000/"})
        transport = AgentTransport(cfg, ledger)
        assert transport.carries_progress
        routed = transport.route("http://127.0.0.1:8770/v1/signal/d/1?sig=x")
        assert "http://10.9.0.1:9000/v1/signal/d/1?sig=x" == routed
        assert {"Authorization": "Bearer c"} == transport.auth_headers(routed)
        assert {} == transport.auth_headers("http://swift:8080/v1/AUTH_t/c/o")
        assert {} == transport.auth_headers("http://10.9.0.1:90001/v1/agent/document")  # a prefix is not it
        assert transport.accept({"kind": "HTTP"})  # moved back: straight to the control plane
        assert "http://127.0.0.1:8770/v1/agent/document" == transport.route(cfg.document_url)
        assert {} == transport.auth_headers("http://10.9.0.1:9000/v1/agent/document")
    finally:
        ledger.close()


def test_relay_is_a_transport_kind_only_where_configured():
    """RELAY is a transport name, refused unless a relay is configured; its section names the relay's URL."""
    assert "RELAY" == normalize("relay", "t")
    assert "RELAY" in CONFIG_TRANSPORTS
    lifetimes = Lifetimes(3600.0, 60.0)
    with pytest.raises(BadRequestError, match="transport RELAY is not configured"):
        Transports([], lifetimes).check_kind("RELAY", "transport")
    Transports([RelayStore("http://r:1/")], lifetimes).check_kind("RELAY", "transport")
    assert {"kind": "RELAY", "url": "http://r:1"} == RelayStore("http://r:1/").section("s", [], 0)


def test_signed_signal_file_refuses_every_single_byte_change(tmp_path: Path) -> None:
    """The envelope's signature covers server, deployment generation and result: any flip is caught."""
    publics = keys.ensure_keys(tmp_path)
    body = b'{"deploy_status_code": 0, "deploy_stdout": "ok", "anneal": {"generation": 3}}'
    envelope = json.loads(offline.sign_signal(tmp_path, "srv-1", "dep-1/3", body))
    message = offline.signal_message("srv-1", "dep-1/3", envelope["signal"])
    assert offline.verify(publics["sign"], envelope["signature"], message)
    for i in range(len(message)):
        flipped = message[:i] + bytes([message[i] ^ 0x01]) + message[i + 1 :]
        assert not offline.verify(publics["sign"], envelope["signature"], flipped), i
    other = keys.ensure_keys(tmp_path / "other")
    assert not offline.verify(other["sign"], envelope["signature"], message)  # another server's key
    assert not offline.verify(publics["sign"], "not base64!", message)


def test_enrolment_request_signature_covers_every_field(tmp_path: Path) -> None:
    """An offline enrolment request's signature breaks when its server, token, hostname or box key changes."""
    bundle = {"server_id": "srv-1", "name": "n", "control_public_key": "k", "enrol_token": "t"}
    offline.enrol(tmp_path / "state", bundle, str(tmp_path), tmp_path / "out")
    request = json.loads((tmp_path / "out" / offline.request_file_name("srv-1")).read_bytes())
    key = request["public_keys"]["sign"]
    assert offline.verify(key, request["signature"], offline.request_message(request))
    for field, value in (("server_id", "srv-2"), ("enrol_token", "u"), ("hostname", "h2")):
        changed = {**request, field: value}
        assert not offline.verify(key, request["signature"], offline.request_message(changed)), field
    box = {**request, "public_keys": {**request["public_keys"], "box": "A" * 43 + "="}}
    assert not offline.verify(key, request["signature"], offline.request_message(box))


def test_offline_agent_stays_on_its_media_when_a_document_moves_it_where_it_cannot_go(tmp_path: Path) -> None:
    """No URL, no credential: HTTP and RELAY would strand it; it stays on LOCAL and keeps writing files."""
    cfg = AgentConfig(
        **{
            **agent_config("").__dict__,
            "document_url": "",
            "heartbeat_url": "",
            "media_dir": str(tmp_path),
            "signal_dir": str(tmp_path / "out"),
            "extra": {"enrolment": "offline"},
        }
    )
    keys.ensure_keys(tmp_path)
    ledger = Ledger(tmp_path)
    try:
        adopt_enrolment(ledger, {"kind": "LOCAL", "signals": {}})
        transport = AgentTransport(cfg, ledger)
        for kind in ("HTTP", "RELAY"):
            assert not transport.accept({"kind": kind, "url": "http://r:1"})
            assert "LOCAL" == transport.kind
        assert transport.accept({"kind": "SWIFT", "document_url": "http://swift/x"})  # URLs of its own: fine
        assert transport.accept({"kind": "LOCAL"})
        out = Outgoing(1, "item", "http://127.0.0.1:8770/v1/signal/dep-1/4?sig=x", "POST", b"{}", 0)
        status, where = asyncio.run(transport.deliver(None, out))  # type: ignore[arg-type]
        assert 201 == status, where
        assert json.loads((tmp_path / "out" / "dep-1.4.json").read_bytes())["name"] == "dep-1/4"
    finally:
        ledger.close()
