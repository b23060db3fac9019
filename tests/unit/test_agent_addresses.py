"""The agent reports every global address but loopback's, as `ip -j addr` lists them."""

from __future__ import annotations

import asyncio
import json

from agent.addresses import Addresses, parse

IP_J_ADDR = [
    {
        "ifname": "lo",
        "flags": ["LOOPBACK", "UP"],
        "address": "00:00:00:00:00:00",
        "addr_info": [{"family": "inet", "local": "127.0.0.1", "scope": "host"}],
    },
    {
        "ifname": "eth0",
        "flags": ["UP"],
        "address": "52:54:00:12:34:56",
        "addr_info": [
            {"family": "inet", "local": "10.0.0.5", "scope": "global"},
            {"family": "inet6", "local": "fd00::5", "scope": "global"},
            {"family": "inet6", "local": "fe80::1", "scope": "link"},
        ],
    },
    {"ifname": "eth1", "flags": ["UP"], "address": "52:54:00:00:00:01", "addr_info": []},
]


def test_global_addresses_of_every_interface_but_loopback_are_reported() -> None:
    """Loopback and link-local addresses are left out; each entry names its interface, version and MAC."""
    assert parse(json.dumps(IP_J_ADDR)) == [
        {"interface": "eth0", "addr": "10.0.0.5", "version": 4, "mac": "52:54:00:12:34:56"},
        {"interface": "eth0", "addr": "fd00::5", "version": 6, "mac": "52:54:00:12:34:56"},
    ]


def test_output_that_is_not_ip_json_reports_nothing() -> None:
    """Garbage, an object or entries of the wrong shape give no addresses instead of an error."""
    for text in ("", "not json", "{}", '[1, "x", {"addr_info": [{"family": "inet"}]}]'):
        assert parse(text) == []


def test_heartbeats_between_reports_carry_the_last_addresses_unflagged() -> None:
    """Nothing before the first report; a report flags news; a beat between reports repeats it unflagged."""
    tracker = Addresses()
    assert asyncio.run(tracker.fields(fresh=False)) == {}
    first = asyncio.run(tracker.fields(fresh=True))
    assert first["addresses_changed"] is True
    assert asyncio.run(tracker.fields(fresh=False)) == {
        "addresses": first["addresses"],
        "addresses_changed": False,
    }
