"""Settings of one control-plane process: a frozen dataclass, passed in, never global."""

from __future__ import annotations

import gc
import ipaddress
from dataclasses import dataclass
from pathlib import Path

DEFAULT_LISTEN = "127.0.0.1:8770"
#: The cyclic collector's thresholds for a control plane (Python's default: 700, 10, 10). Each engine
#: step and signal batch makes a few hundred thousand short-lived ORM and JSON objects, so the default
#: ran a young collection every 700 of them; measured with bench/scale_phases.py at 10,000 deployments
#: on SQLite, these took the create's CPU from 22.7 s to 20.1 s, peak RSS unchanged (206 / 205 MB).
COLLECTOR_THRESHOLDS = (100_000, 50, 100)


@dataclass(frozen=True)
class Settings:
    """Everything `anneal serve` is told; tests build one directly."""

    data_dir: Path
    database_url: str = ""
    listen: str = DEFAULT_LISTEN
    #: HOST:PORT of Heat's Orchestration API v1 (docs/heat-api.md); "" leaves it off.
    heat_listen: str = ""
    #: HOST:PORT of a /metrics port that asks no token (docs/operations.md, "Metrics"); "" leaves it off.
    metrics_listen: str = ""
    #: Let metrics_listen be a non-loopback address (it asks no token).
    metrics_public: bool = False
    #: URL agents use to reach this control plane; defaults to http://<listen>.
    public_url: str = ""
    provisioner: str = "enrol"
    default_signal_transport: str = "CFN_SIGNAL"
    #: Per-deployment timeout when neither the deployment nor its config sets one (seconds).
    deployment_timeout: float = 3600.0
    #: Seconds one minute of a stack's timeout_mins lasts (Heat's 60; tests shorten it).
    timeout_minute: float = 60.0
    #: Minutes a stack's create, update, delete, suspend or resume may take when the stack sets no
    #: timeout_mins (Heat's stack_action_timeout, 3600 s); 0: no timeout.
    stack_timeout: int = 60
    #: The longest an agent's long-poll may wait (seconds).
    long_poll_max: float = 60.0
    #: How many servers' signed documents the HTTP publisher keeps in memory (the rest are rendered
    #: again from the database when their agent fetches them); about 7.5 KB each with 5 deployments.
    document_cache: int = 20_000
    #: How long a one-time enrolment token stays valid (seconds).
    enrol_token_ttl: float = 7 * 24 * 3600.0
    #: Cap on a template's text and on each environment's (bytes); Heat's default
    #: max_template_size. A stack of tens of thousands of deployments needs more.
    max_template_bytes: int = 512 * 1024
    #: Body cap for every request (bytes); 0: twice the template cap, at least 2 MiB.
    max_request_bytes: int = 0
    #: What evaluating one template's functions may build in all (bytes, docs/templates.md);
    #: 0: 128 times the template cap, at least 64 MiB.
    max_evaluation_bytes: int = 0
    #: How deep stacks may nest (template resources, groups); Heat's max_nested_stack_depth.
    max_nested_depth: int = 5
    #: Seconds a request body may take to arrive (408 after).
    body_timeout: float = 30.0
    #: Seconds before an idle connection (kept alive, or silent since it opened) is closed.
    idle_timeout: float = 15.0
    #: Agents this process is meant to serve: the descriptor limit is checked against it.
    max_agents: int = 1000
    #: Seconds an agent may stay silent before it is shown as silent.
    heartbeat_lease: float = 90.0
    #: How long a claimed unit of engine work stays leased without renewal (seconds);
    #: work of a process that died goes to another process after at most this long.
    work_lease: float = 15.0
    #: Resources an engine step acts on between two commits (each commit publishes its documents at
    #: once, control/engine/slices.py); 0: one commit per step (per 2,000 resources in a big stack).
    step_slice: int = 100
    #: How often each process looks for due work committed by other processes (seconds).
    work_poll: float = 0.5
    #: How often each process compares its documents with the database's serials (seconds);
    #: 0: twice work_poll, or REPUBLISH_FALLBACK where notifications carry changes (PostgreSQL).
    republish_poll: float = 0.0
    #: How long a signed document stays valid (seconds); it is re-signed after half of it.
    document_ttl: float = 24 * 3600.0
    #: Days an audit row is kept (0: kept for ever); older rows are pruned in batches (services/audit.py).
    audit_retention_days: float = 90.0
    #: Environment passed to local agents (provisioner "local"): poll settings for tests.
    local_agent_args: tuple[str, ...] = ()
    # Store transports (docs/transports.md); a store is on when its first setting is given.
    #: Swift: tempauth/v1 auth URL, user and key of the account documents and signals live in.
    swift_auth_url: str = ""
    swift_user: str = ""
    swift_key: str = ""
    #: Scheme://host:port agents reach Swift at, when it differs from the storage URL's.
    swift_public_url: str = ""
    #: S3 (or Swift's s3api): endpoint, access and secret key, region.
    s3_endpoint: str = ""
    s3_access_key: str = ""
    s3_secret_key: str = ""
    s3_region: str = "us-east-1"
    s3_public_url: str = ""
    #: Local media: the directory documents are written to (one sub-directory per server).
    local_dir: str = ""
    #: RELAY: the URL agents reach the relay (`anneal-agent relay`) at.
    relay_url: str = ""
    #: Prefix of container and bucket names.
    store_prefix: str = "anneal"
    #: Seconds a store URL must stay usable; refreshed when half of it is left.
    store_url_lifetime: float = 2 * 86400.0
    #: Seconds added to every URL lifetime for clock skew between hosts.
    store_clock_margin: float = 900.0
    #: Seconds between an agent's polls of a store.
    store_poll_interval: float = 5.0
    #: Seconds between listings of a store's signal objects.
    store_signal_poll: float = 2.0
    #: Seconds between Swift TempURL key rotations (0: fixed keys); at least the URL lifetime + margin.
    swift_key_rotation: float = 0.0
    # Keystone (docs/heat-api.md, "Keystone"): on when keystone_url is given.
    #: Keystone's identity v3 URL (e.g. http://keystone:5000/v3): tokens that are none of Anneal's are validated there.
    keystone_url: str = ""
    #: The service user Anneal validates tokens as (it needs Keystone's service or admin role), its
    #: password, the project its token is scoped to, and the domain id of both.
    keystone_user: str = ""
    keystone_password: str = ""
    keystone_project: str = "service"
    keystone_domain: str = "default"
    #: Seconds a validated Keystone token is believed without asking again (a revocation takes effect within it).
    keystone_cache: float = 30.0

    @property
    def db_url(self) -> str:
        """The SQLAlchemy URL with an asyncio driver."""
        url = self.database_url or f"sqlite:///{self.data_dir / 'anneal.db'}"
        return async_url(url)

    @property
    def request_cap(self) -> int:
        """The body cap in force: twice the template cap leaves room for JSON escaping and environments."""
        return self.max_request_bytes or max(2 * 1024 * 1024, 2 * self.max_template_bytes)

    @property
    def evaluation_cap(self) -> int:
        """The evaluation budget in force: it grows with the template cap, as big stacks build more."""
        return self.max_evaluation_bytes or max(64 * 1024 * 1024, 128 * self.max_template_bytes)

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://{self.listen}").rstrip("/")

    def host_port(self) -> tuple[str, int]:
        return split_host_port(self.listen)

    def heat_host_port(self) -> tuple[str, int]:
        return split_host_port(self.heat_listen)

    def metrics_host_port(self) -> tuple[str, int]:
        return split_host_port(self.metrics_listen)


def split_host_port(listen: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) as (host, port); the host defaults to loopback."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def async_url(url: str) -> str:
    """Map a plain SQLAlchemy URL to its asyncio driver (aiosqlite, asyncpg)."""
    for plain, driver in (
        ("sqlite://", "sqlite+aiosqlite://"),
        ("postgresql://", "postgresql+asyncpg://"),
        ("postgres://", "postgresql+asyncpg://"),
    ):
        if url.startswith(plain):
            return driver + url[len(plain) :]
    return url


def loopback(host: str) -> bool:
    """Whether *host* is a loopback name or address (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # another name: it may resolve anywhere


def keystone_problem(settings: Settings) -> str | None:
    """Why the Keystone options cannot work as given, or None."""
    if not settings.keystone_url:
        return None
    if not settings.keystone_url.startswith(("http://", "https://")):
        return f"--keystone-url {settings.keystone_url!r}: expected Keystone's v3 URL, http(s)://HOST:PORT/v3"
    if not settings.keystone_user or not settings.keystone_password:
        return "--keystone-url needs the service user: --keystone-user and ANNEAL_KEYSTONE_PASSWORD"
    if settings.keystone_cache < 0:
        return "--keystone-cache must be 0 or more seconds"
    return None


def audit_retention_problem(settings: Settings) -> str | None:
    """Why ``--audit-retention-days`` cannot be used, or None."""
    if settings.audit_retention_days < 0:
        return f"--audit-retention-days {settings.audit_retention_days:g}: expected 0 (keep every row) or more days"
    return None


def stack_timeout_problem(settings: Settings) -> str | None:
    """Why ``--stack-timeout`` cannot be used, or None."""
    if settings.stack_timeout < 0:
        return f"--stack-timeout {settings.stack_timeout}: expected 0 (no timeout) or more minutes"
    return None


def metrics_listen_problem(settings: Settings) -> str | None:
    """Why ``--metrics-listen`` may not be used as given, or None: without a token it stays on loopback."""
    if not settings.metrics_listen:
        return None
    try:
        host, _ = settings.metrics_host_port()
    except ValueError:
        return f"--metrics-listen {settings.metrics_listen!r}: expected HOST:PORT"
    if loopback(host) or settings.metrics_public:
        return None
    return (
        f"--metrics-listen {settings.metrics_listen!r}: {host} is not a loopback address, and this port "
        "answers without a token; use 127.0.0.1:PORT, or add --metrics-public to serve it there anyway"
    )


def tune_collector() -> None:
    """Set the process's cyclic-collector thresholds to COLLECTOR_THRESHOLDS (`anneal serve` and the benches)."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
