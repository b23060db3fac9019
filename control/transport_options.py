"""`anneal serve` options of the store transports (no heavy imports: the CLI loads this)."""

from __future__ import annotations

import argparse
import os
from typing import Any

#: option -> (settings field, environment variable, help)
OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "--swift-auth-url",
        "swift_auth_url",
        "ANNEAL_SWIFT_AUTH_URL",
        "Swift tempauth/v1 auth URL (enables SWIFT)",
    ),
    ("--swift-user", "swift_user", "ANNEAL_SWIFT_USER", "Swift user, e.g. account:user"),
    ("--swift-key", "swift_key", "ANNEAL_SWIFT_KEY", "Swift key (prefer the environment variable)"),
    (
        "--swift-public-url",
        "swift_public_url",
        "ANNEAL_SWIFT_PUBLIC_URL",
        "scheme://host:port agents reach Swift at",
    ),
    ("--s3-endpoint", "s3_endpoint", "ANNEAL_S3_ENDPOINT", "S3 endpoint URL (enables S3)"),
    ("--s3-access-key", "s3_access_key", "ANNEAL_S3_ACCESS_KEY", "S3 access key id"),
    (
        "--s3-secret-key",
        "s3_secret_key",
        "ANNEAL_S3_SECRET_KEY",
        "S3 secret (prefer the environment variable)",
    ),
    ("--s3-region", "s3_region", "ANNEAL_S3_REGION", "S3 region (default us-east-1)"),
    (
        "--s3-public-url",
        "s3_public_url",
        "ANNEAL_S3_PUBLIC_URL",
        "S3 endpoint agents reach (URLs are signed for it)",
    ),
    ("--local-dir", "local_dir", "ANNEAL_LOCAL_DIR", "directory for LOCAL documents (enables LOCAL)"),
    ("--store-prefix", "store_prefix", "ANNEAL_STORE_PREFIX", "prefix of container and bucket names"),
)
FLOATS: tuple[tuple[str, str, str], ...] = (
    (
        "--store-url-lifetime",
        "store_url_lifetime",
        "seconds a store URL stays usable (default 2 days, S3 max 7)",
    ),
    (
        "--store-clock-margin",
        "store_clock_margin",
        "seconds added to URL lifetimes for clock skew (default 900)",
    ),
    ("--store-poll-interval", "store_poll_interval", "seconds between an agent's store polls (default 5)"),
    ("--store-signal-poll", "store_signal_poll", "seconds between listings of signal objects (default 2)"),
    (
        "--swift-key-rotation",
        "swift_key_rotation",
        "seconds between Swift TempURL key rotations (default 0: fixed keys; >= URL lifetime + margin)",
    ),
)


def add(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("transports (docs/transports.md)")
    for flag, dest, env, text in OPTIONS:
        g.add_argument(flag, dest=dest, default=os.environ.get(env), help=f"{text} [{env}]")
    for flag, dest, text in FLOATS:
        g.add_argument(flag, dest=dest, type=float, default=None, help=text)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Settings fields the options gave (unset ones keep their defaults)."""
    names = [dest for _, dest, _, _ in OPTIONS] + [dest for _, dest, _ in FLOATS]
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
