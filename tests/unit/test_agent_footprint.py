"""What the agent keeps out of its memory: cryptography (its own box key, verifying, opening), TLS for http://."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent import envelope, keys, sealed, tls
from tests.support.envelopes import NOW, document, pub, rotated


def test_the_box_key_the_agent_wrote_is_read_without_cryptography(tmp_path: Path) -> None:
    """The key ensure_keys wrote loads as the same raw key, and cryptography stays unloaded."""
    keys.ensure_keys(tmp_path)
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom agent import keys\n"
        f"k = keys.load_box_key(Path({str(tmp_path)!r}))\n"
        "print(json.dumps([k.hex(), 'cryptography' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    raw, pem_reader = json.loads(out.stdout)
    pem = (tmp_path / keys.KEY_DIR / "box.pem").read_bytes()
    expected = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(expected, X25519PrivateKey)
    assert (expected.private_bytes_raw().hex(), False) == (raw, pem_reader)


def test_a_box_key_in_another_pem_form_still_loads(tmp_path: Path) -> None:
    """A box key written with other line breaks is read by cryptography's PEM reader, not refused."""
    keys.ensure_keys(tmp_path)
    path = tmp_path / keys.KEY_DIR / "box.pem"
    original = keys.load_box_key(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert len(original) == 32
    assert original == keys.load_box_key(tmp_path)


def test_a_box_key_that_is_not_one_is_refused_with_its_path(tmp_path: Path) -> None:
    """A box.pem holding an Ed25519 key is a ValueError naming the file."""
    keys.ensure_keys(tmp_path)
    path = tmp_path / keys.KEY_DIR / "box.pem"
    path.write_bytes((tmp_path / keys.KEY_DIR / "sign.pem").read_bytes())
    with pytest.raises(ValueError, match=r"box\.pem"):
        keys.load_box_key(tmp_path)


def test_https_is_found_in_urls_and_in_files(tmp_path: Path) -> None:
    """needed() and in_files() see https: in any case, across a read boundary, and not in http: alone."""
    assert tls.needed(["http://a", "HTTPS://b"]) and not tls.needed(["http://a", ""])
    big = tmp_path / "ledger"
    big.write_bytes(b"x" * ((1 << 20) - 3) + b'"https://store/doc"')
    plain = tmp_path / "config"
    plain.write_text('{"url": "http://cp:8770"}')
    assert tls.in_files([tmp_path / "absent", big]) and not tls.in_files([plain, tmp_path / "absent"])


def test_ssl_withheld_before_asyncio_loads_nothing_and_asks_for_a_restart() -> None:
    """With ssl withheld, asyncio and the agent load without it; an https context calls the restart hook."""
    code = (
        "import json, sys\nfrom agent import tls\nok = tls.withhold()\n"
        "import agent.commands, agent.loop, agent.inline\n"
        "asked = []\ntls.on_needed = lambda: asked.append(1)\n"
        "try:\n    tls.context()\n    refused = False\nexcept tls.TlsWithheldError:\n    refused = True\n"
        "print(json.dumps([ok, sys.modules.get('ssl') is not None, 'aiohttp' in sys.modules, refused, asked]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [True, False, False, True, [1]] == json.loads(out.stdout)


def test_a_running_agent_verifies_and_opens_secrets_without_cryptography(tmp_path: Path) -> None:
    """A chained, signed document verifies and a sealed secret opens in an agent process that never loads
    cryptography nor hashlib's libcrypto binding: the system's libcrypto does both."""
    keys.ensure_keys(tmp_path)
    signers, chain = rotated(2)
    raw = envelope.sign(document(), signers[1], chain)
    box = keys.load_box_key(tmp_path)
    secret = sealed.seal(
        {"password": "s3cr3t"},
        X25519PrivateKey.from_private_bytes(box).public_key().public_bytes_raw(),
        "srv/d/config",
    )
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom agent import tls\ntls.withhold()\n"
        "import agent.commands, agent.loop, agent.inline\nfrom agent import crypto, envelope, keys, sealed\n"
        f"signer = envelope.verify({raw!r}, bytes.fromhex({pub(signers[0]).hex()!r}), {NOW}).signer\n"
        f"opened = sealed.open_sealed({secret!r}, keys.load_box_key(Path({str(tmp_path)!r})), 'srv/d/config')\n"
        "print(json.dumps([signer.hex(), opened, crypto.backend().name, "
        "[m for m in ('cryptography', '_hashlib', 'ssl') if sys.modules.get(m)]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [pub(signers[1]).hex(), {"password": "s3cr3t"}, "libcrypto", []] == json.loads(out.stdout)


def test_parsing_the_command_line_keeps_shutil_out_and_help_still_fits_the_terminal() -> None:
    """argparse's formatter would load shutil (and bz2, lzma) for good; ours reads COLUMNS as shutil would."""
    code = (
        "import json, sys\nfrom agent import cli\n"
        "cli.build_parser().parse_args(['run', '--state-dir', '/tmp/x'])\n"
        "print(json.dumps([m for m in ('shutil', 'bz2', 'lzma') if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [] == json.loads(out.stdout)
    env = {**os.environ, "COLUMNS": "50"}
    helps = []
    for formatter in ("cli._Formatter", "argparse.HelpFormatter"):  # ours, then argparse's own
        code = f"import argparse\nfrom agent import cli\ncli._Formatter = {formatter}\ncli.main(['run', '--help'])\n"
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env
        )
        helps.append(run.stdout)
    assert "--state-dir" in helps[0]
    assert helps[0] == helps[1]
