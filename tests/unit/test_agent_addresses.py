"""The agent reports every global address but loopback's, as `ip -j addr` lists them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

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


def test_addresses_are_read_with_ip_from_path_and_none_without_it(tmp_path: Path) -> None:
    """`ip` is found on PATH by the exec itself (no shutil kept loaded); with no `ip` on PATH, []."""
    fake = tmp_path / "ip"  # a fake iproute2: this machine's own interfaces vary
    fake.write_text(f"#!/bin/sh\necho '{json.dumps(IP_J_ADDR)}'\n")  # echo: a builtin, PATH holds only ip
    fake.chmod(0o755)
    code = (
        "import asyncio, json, os, sys\nfrom agent import addresses\n"
        f"os.environ['PATH'] = {str(tmp_path)!r}\nfound = asyncio.run(addresses.discover())\n"
        "os.environ['PATH'] = '/nonexistent'\n"
        "print(json.dumps([found, asyncio.run(addresses.discover()), 'shutil' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [parse(json.dumps(IP_J_ADDR)), [], False] == json.loads(out.stdout)
