"""`anneal serve`: the control plane as a process."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

from agent import loglimit, serving
from control.api.app import make_app
from control.cli import background, transport_options
from control.cli.db import upgrade_command
from control.settings import (
    Settings,
    audit_retention_problem,
    keystone_problem,
    metrics_listen_problem,
    stack_timeout_problem,
    tune_collector,
)
from control.store.db import SchemaError

log = logging.getLogger("control")
ACCESS_LOG = "control.access"
# Line breaks, C0 and C1 controls and the bidirectional overrides.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class OneLine(logging.Formatter):
    """Each record's message escaped to one line of plain text: a name or a path taken from a
    request cannot forge a log line or send escape codes to whoever reads the log."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = _UNSAFE.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), record.message)
        return super().formatMessage(record)


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(
        data_dir=args.data_dir.resolve(),
        database_url=args.db,
        listen=args.listen,
        heat_listen=args.heat_listen,
        metrics_listen=args.metrics_listen,
        metrics_public=args.metrics_public,
        public_url=args.public_url,
        provisioner=args.provisioner,
        deployment_timeout=args.deployment_timeout,
        timeout_minute=args.timeout_minute,
        stack_timeout=args.stack_timeout,
        document_ttl=args.document_ttl,
        audit_retention_days=args.audit_retention_days,
        local_agent_args=tuple(args.agent_arg),
        work_lease=args.work_lease,
        step_slice=args.step_slice,
        republish_poll=args.republish_poll,
        heartbeat_lease=args.heartbeat_lease,
        max_template_bytes=args.max_template_bytes,
        max_nested_depth=args.max_nested_depth,
        max_request_bytes=args.max_request_bytes,
        max_evaluation_bytes=args.max_evaluation_bytes,
        max_agents=args.max_agents,
        document_cache=args.document_cache,
        idle_timeout=args.idle_timeout,
        body_timeout=args.body_timeout,
        **transport_options.settings(args),
    )


def serve(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    # A line repeated many times a second is logged once per window, with the count (the access log is not).
    loglimit.install(exempt=[ACCESS_LOG])
    # aiosqlite logs every statement with its parameters at DEBUG: never, whatever the level.
    logging.getLogger("aiosqlite").setLevel(max(logging.INFO, logging.getLogger().level))
    # Alembic names its context at INFO on every start; the schema module says what it did.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))
    settings = settings_from(args)
    tune_collector()
    if settings.request_cap < settings.max_template_bytes:
        print(
            f"anneal serve: --max-request-bytes {settings.request_cap} is below --max-template-bytes "
            f"{settings.max_template_bytes}: a template at its cap could not be sent",
            file=sys.stderr,
        )
        return 2
    if (
        settings.max_agents < 1
        or min(settings.idle_timeout, settings.body_timeout, settings.timeout_minute) <= 0
    ):
        print(
            "anneal serve: --max-agents, --idle-timeout, --body-timeout and --timeout-minute must be above 0",
            file=sys.stderr,
        )
        return 2
    problem = (
        metrics_listen_problem(settings)
        or keystone_problem(settings)
        or audit_retention_problem(settings)
        or stack_timeout_problem(settings)
    )
    if problem is not None:
        print(f"anneal serve: {problem}", file=sys.stderr)
        return 2
    host, port = settings.host_port()
    log.info("control plane on http://%s:%s, data in %s", host, port, settings.data_dir)
    log.info("web view on http://%s:%s/ui/ (log in with %s)", host, port, settings.data_dir / "admin-token")
    if settings.heat_listen:
        heat_host, heat_port = settings.heat_host_port()
        log.info("Heat's Orchestration API v1 on http://%s:%s/v1/<project>", heat_host, heat_port)
    if settings.keystone_url:
        log.info(
            "Keystone tokens validated at %s (believed for %g s)",
            settings.keystone_url,
            settings.keystone_cache,
        )
    if settings.metrics_listen:
        metrics_host, metrics_port = settings.metrics_host_port()
        log.info("Prometheus metrics on http://%s:%s/metrics (no token)", metrics_host, metrics_port)
    limits = serving.Limits(max_agents=settings.max_agents, idle_timeout=settings.idle_timeout)
    ready = background.announce(Path(args.pid_file).resolve()) if args.pid_file else None
    try:
        serving.run(
            make_app(settings),
            host,
            port,
            limits,
            f"--max-agents {settings.max_agents}",
            ready,
            access_log=logging.getLogger(ACCESS_LOG) if args.access_log else None,
            access_log_format='%a "%r" %s via=%{Via}i',
            shutdown_timeout=5,
        )
    except SchemaError as e:
        print(f"anneal serve: {e}", file=sys.stderr)
        if e.upgradable:
            print(
                "back the database up, stop every control plane that uses it, then run:\n"
                f"  {upgrade_command(args)}",
                file=sys.stderr,
            )
        return 2
    except (OSError, ValueError) as e:
        print(f"anneal serve: {e}", file=sys.stderr)
        return 2
    finally:
        if args.pid_file:
            background.forget(Path(args.pid_file).resolve())
    return 0
