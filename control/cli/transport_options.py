"""`anneal serve` options of the store transports and Keystone, each also read from the environment (no heavy imports)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    """One option: its flag, the Settings field it sets, its help, and where else it may come from."""

    flag: str
    dest: str
    help: str
    #: Environment variable read when the flag is not given (keys belong there, not in argv).
    env: str = ""
    kind: type = str


OPTIONS: tuple[Option, ...] = (
    Option(
        "--swift-auth-url",
        "swift_auth_url",
        "Swift tempauth/v1 auth URL (enables SWIFT)",
        "ANNEAL_SWIFT_AUTH_URL",
    ),
    Option("--swift-user", "swift_user", "Swift user, e.g. account:user", "ANNEAL_SWIFT_USER"),
    Option("--swift-key", "swift_key", "Swift key (prefer the environment variable)", "ANNEAL_SWIFT_KEY"),
    Option(
        "--swift-public-url",
        "swift_public_url",
        "scheme://host:port agents reach Swift at",
        "ANNEAL_SWIFT_PUBLIC_URL",
    ),
    Option("--s3-endpoint", "s3_endpoint", "S3 endpoint URL (enables S3)", "ANNEAL_S3_ENDPOINT"),
    Option("--s3-access-key", "s3_access_key", "S3 access key id", "ANNEAL_S3_ACCESS_KEY"),
    Option(
        "--s3-secret-key",
        "s3_secret_key",
        "S3 secret (prefer the environment variable)",
        "ANNEAL_S3_SECRET_KEY",
    ),
    Option("--s3-region", "s3_region", "S3 region (default us-east-1)", "ANNEAL_S3_REGION"),
    Option(
        "--s3-public-url",
        "s3_public_url",
        "S3 endpoint agents reach (URLs are signed for it)",
        "ANNEAL_S3_PUBLIC_URL",
    ),
    Option("--local-dir", "local_dir", "directory for LOCAL documents (enables LOCAL)", "ANNEAL_LOCAL_DIR"),
    Option("--relay-url", "relay_url", "URL agents reach the relay at (enables RELAY)", "ANNEAL_RELAY_URL"),
    Option("--store-prefix", "store_prefix", "prefix of container and bucket names", "ANNEAL_STORE_PREFIX"),
    Option(
        "--store-url-lifetime",
        "store_url_lifetime",
        "seconds a store URL stays usable (default 2 days, S3 max 7)",
        kind=float,
    ),
    Option(
        "--store-clock-margin",
        "store_clock_margin",
        "seconds added to URL lifetimes for clock skew (default 900)",
        kind=float,
    ),
    Option(
        "--store-poll-interval",
        "store_poll_interval",
        "seconds between an agent's store polls (default 5)",
        kind=float,
    ),
    Option(
        "--store-signal-poll",
        "store_signal_poll",
        "seconds between listings of signal objects (default 2)",
        kind=float,
    ),
    Option(
        "--swift-key-rotation",
        "swift_key_rotation",
        "seconds between Swift TempURL key rotations (default 0: fixed keys; >= URL lifetime + margin)",
        kind=float,
    ),
)


KEYSTONE: tuple[Option, ...] = (
    Option(
        "--keystone-url",
        "keystone_url",
        "Keystone's v3 URL: validate tokens that are none of Anneal's there",
        "ANNEAL_KEYSTONE_URL",
    ),
    Option(
        "--keystone-user",
        "keystone_user",
        "service user tokens are validated as (service or admin role)",
        "ANNEAL_KEYSTONE_USER",
    ),
    Option(
        "--keystone-password",
        "keystone_password",
        "the service user's password (prefer the environment variable)",
        "ANNEAL_KEYSTONE_PASSWORD",
    ),
    Option(
        "--keystone-project",
        "keystone_project",
        "project the service user's token is scoped to (default service)",
        "ANNEAL_KEYSTONE_PROJECT",
    ),
    Option(
        "--keystone-domain",
        "keystone_domain",
        "domain id of the service user and project (default default)",
        "ANNEAL_KEYSTONE_DOMAIN",
    ),
    Option(
        "--keystone-cache",
        "keystone_cache",
        "seconds a validated token is believed; a revocation takes effect within it (default 30)",
        kind=float,
    ),
)


def add(
    p: argparse.ArgumentParser,
    options: tuple[Option, ...] = OPTIONS,
    title: str = "transports (docs/transports.md)",
) -> None:
    g = p.add_argument_group(title)
    for o in options:
        text = f"{o.help} [{o.env}]" if o.env else o.help
        default = os.environ.get(o.env) if o.env else None  # argparse converts it with `type`
        g.add_argument(o.flag, dest=o.dest, type=o.kind, default=default, help=text)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Settings fields the options gave (unset ones keep their defaults)."""
    given = OPTIONS + KEYSTONE
    return {o.dest: getattr(args, o.dest) for o in given if getattr(args, o.dest, None) is not None}
