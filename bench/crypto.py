"""Sign and verify cost per document: `python bench/crypto.py [--repeat N]`.

Measures, for a typical and a large per-server document, what the control plane
pays to sign one (`envelope.sign`) and the agent to verify one (`envelope.verify`:
parse, canonical check, chain, Ed25519), against the baseline of the same run:
plain JSON encoding (canonical `json.dumps`) and decoding (`json.loads`) of the
same document, which any document path pays anyway. Also the per-value cost of
sealing a secret to a server's X25519 key and opening it, and of encrypting a
derived config at rest. Prints a table; docs/performance.md records the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/crypto.py` puts bench/, not the repository, on the path
    sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # noqa: E402

from agent import envelope, sealed, wire  # noqa: E402
from control.store import crypt  # noqa: E402

NOW = 1_900_000_000.0


def document(deployments: int, config_bytes: int) -> dict[str, Any]:
    """A server document of *deployments* script deployments, each config about *config_bytes*."""
    items, meta = [], {}
    for n in range(deployments):
        item = wire.DeploymentItem(
            id=f"4f1c2d3e-0000-4000-8000-{n:012d}",
            name=f"{n:03d}_configure",
            group="script",
            creation_time="2026-11-22T04:00:00Z",
            config="#!/bin/sh\nset -e\n" + ("echo configuring step; " * (config_bytes // 24)) + "\n",
            inputs=(
                *(wire.InputItem(f"INPUT_{i}", f"value-{n}-{i}") for i in range(8)),
                wire.InputItem("deploy_signal_id", "http://10.0.0.1:8770/v1/signal/d/1?sig=" + "ab" * 32),
            ),
            outputs=(wire.OutputItem("result"),),
        )
        items.append(item)
        meta[item.id] = wire.ItemMeta(f"dep-{n}", 1, "hmac-sha256:" + "0" * 64, "CREATE", 3600.0)
    doc = wire.Document(
        "srv-1", 42, envelope.iso(NOW), tuple(items), meta, expires_at=envelope.iso(NOW + 86400)
    )
    return doc.to_json()


def per_call(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds per call over 5 rounds of *repeat* calls."""
    fn()  # warm up
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - start) / repeat)
    return statistics.median(rounds)


def measure(repeat: int) -> list[dict[str, Any]]:
    key = Ed25519PrivateKey.generate()
    pub = envelope.public_raw(key.public_key())
    keys = [key] + [Ed25519PrivateKey.generate() for _ in range(3)]
    chain = [
        envelope.make_link(keys[i], envelope.public_raw(keys[i + 1].public_key()), "t") for i in range(3)
    ]
    rows = []
    for label, deployments, config_bytes, n in (
        ("typical (5 deployments)", 5, 1024, repeat),
        ("large (200 deployments)", 200, 4096, max(1, repeat // 40)),
    ):
        doc = document(deployments, config_bytes)
        raw = envelope.sign(doc, key)
        rotated = envelope.sign(doc, keys[-1], chain)
        encode = per_call(partial(wire.canonical_json, doc), n)
        decode = per_call(partial(json.loads, raw), n)
        sign = per_call(partial(envelope.sign, doc, key), n)
        verify = per_call(partial(envelope.verify, raw, pub, NOW), n)
        verify_chain = per_call(partial(envelope.verify, rotated, pub, NOW), n)
        rows.append(
            {
                "document": label,
                "bytes": len(raw),
                "encode_us": encode * 1e6,
                "sign_us": sign * 1e6,
                "sign_ratio": sign / encode,
                "decode_us": decode * 1e6,
                "verify_us": verify * 1e6,
                "verify_ratio": verify / decode,
                "verify_3_links_us": verify_chain * 1e6,
            }
        )
    return rows


def measure_secrets(repeat: int) -> dict[str, float]:
    box = X25519PrivateKey.generate()
    recipient = box.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    text = sealed.seal("s3cr3t-password", recipient, "srv/item/inputs.PW")
    item = document(1, 1024)["deployments"][0]
    data_key = os.urandom(32)
    stored = crypt.encrypt(data_key, item)
    return {
        "seal_us": per_call(lambda: sealed.seal("s3cr3t-password", recipient, "srv/item/inputs.PW"), repeat)
        * 1e6,
        "open_us": per_call(lambda: sealed.open_sealed(text, box, "srv/item/inputs.PW"), repeat) * 1e6,
        "json_roundtrip_us": per_call(lambda: json.loads(json.dumps(item)), repeat) * 1e6,
        "at_rest_encrypt_us": per_call(lambda: crypt.encrypt(data_key, item), repeat) * 1e6,
        "at_rest_decrypt_us": per_call(lambda: crypt.decrypt(data_key, stored), repeat) * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=400, help="calls per round for the typical document")
    args = parser.parse_args()
    rows = measure(args.repeat)
    print(
        f"{'document':26} {'bytes':>9} {'encode':>9} {'sign':>9} {'x':>6} {'decode':>9} {'verify':>9} {'x':>6} {'3 links':>9}"
    )
    for r in rows:
        print(
            f"{r['document']:26} {r['bytes']:>9,} {r['encode_us']:>8.0f}µ {r['sign_us']:>8.0f}µ {r['sign_ratio']:>5.1f}x "
            f"{r['decode_us']:>8.0f}µ {r['verify_us']:>8.0f}µ {r['verify_ratio']:>5.1f}x {r['verify_3_links_us']:>8.0f}µ"
        )
    s = measure_secrets(args.repeat)
    print("\nper secret value: seal {seal_us:.0f} µs, open {open_us:.0f} µs".format(**s))
    print(
        "per derived config (~1.5 KB) at rest: encrypt {at_rest_encrypt_us:.0f} µs, decrypt {at_rest_decrypt_us:.0f} µs"
        " (baseline JSON dumps+loads {json_roundtrip_us:.0f} µs)".format(**s)
    )
    print(json.dumps({"documents": rows, "secrets": s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
