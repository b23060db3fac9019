"""Our agent in place of Heat's: documents exactly as Heat writes them, signals as Heat reads them.

Settings come from an os-collect-config configuration file (``/etc/os-collect-config.conf``:
``collectors``, ``[request] metadata_url``, ``[local] path``, ``[heat_local] path``,
``polling_interval``) or from the ``os-collect-config`` section of a document, so the agent
replaces os-collect-config + 55-heat-config + heat-config-notify on a server Heat manages
without touching the template:

* collectors ``heat_local`` (the boot metadata, ``/var/lib/heat-cfntools/cfn-init-data``),
  ``request`` (a plain GET of the metadata URL, e.g. a Swift TempURL) and ``local`` (JSON
  files in the local-data dirs) are read and merged in the configured order, later wins, as
  os-collect-config does. A document's own ``os-collect-config.request.metadata_url`` is
  followed when the file names none (Heat's boot-time bootstrap).
* Heat's documents carry no serial and no content hash: a deployment runs at most once per
  derived config id (Heat's rule), which the status says.
* Signals go to ``deploy_signal_id`` with ``deploy_signal_verb``: POST for CFN_SIGNAL, PUT to
  the Swift TempURL for TEMP_URL_SIGNAL, nothing for NO_SIGNAL; the body is Heat's flat form
  only (no ``anneal`` key). HEAT_SIGNAL and ZAQAR_SIGNAL need Keystone and are reported as
  not deliverable.

Documents read this way are not signed: this mode is explicit (``--heat-compat``), and only
in it does the agent accept an unsigned Heat document.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent import wire, wire_caps
from agent.config import AgentConfig
from agent.errors import ConfigError, DocumentRejectedError, SourceNotAvailableError
from agent.fsutil import write_atomic
from agent.httpclient import ClientError
from agent.ledger import Outgoing, encode_body
from agent.loop import Agent
from agent.outbox import Outbox

log = logging.getLogger(__name__)
SETTINGS_FILE = "heat-compat.json"
COLLECTORS = ("heat_local", "request", "local")
DEFAULT_LOCAL_PATH = "/var/lib/os-collect-config/local-data"
DEFAULT_HEAT_LOCAL_PATH = "/var/lib/heat-cfntools/cfn-init-data"
#: Transports whose signal is an HTTP request to deploy_signal_id.
HTTP_SIGNALS = frozenset({"CFN_SIGNAL", "TEMP_URL_SIGNAL"})
RULE = (
    "Heat's documents carry no serial or hash: each deployment runs at most once per derived "
    "config id (Heat's rule); documents are accepted unsigned (--heat-compat)"
)


@dataclass(frozen=True)
class HeatSettings:
    """What os-collect-config would read from its configuration file."""

    collectors: tuple[str, ...] = ("request", "local")
    metadata_url: str = ""
    local_paths: tuple[str, ...] = (DEFAULT_LOCAL_PATH,)
    heat_local_path: str = DEFAULT_HEAT_LOCAL_PATH
    polling_interval: float = 30.0
    source: str = ""
    hook_dirs: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_os_collect_config(text: str, where: str) -> HeatSettings:
    """Read an os-collect-config.conf: an INI file whose `collectors` may repeat (oslo.config)."""
    section = "DEFAULT"
    values: dict[tuple[str, str], list[str]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise ConfigError(f"{where}:{n}: unclosed section header {line!r}")
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{where}:{n}: expected 'key = value', got {line!r}")
        values.setdefault((section, key.strip().replace("-", "_")), []).append(value.strip())
    collectors: list[str] = []
    for entry in values.get(("DEFAULT", "collectors"), []):
        collectors.extend(c.strip() for c in entry.split(",") if c.strip())
    unknown = [c for c in collectors if c not in COLLECTORS]
    if unknown:
        log.warning("%s: collectors %s are not supported by anneal-agent; ignored", where, unknown)
    collectors = [c for c in collectors if c in COLLECTORS]
    interval = values.get(("DEFAULT", "polling_interval"), ["30"])[-1]
    try:
        polling = float(interval)
    except ValueError as e:
        raise ConfigError(f"{where}: polling_interval: expected seconds, got {interval!r}") from e
    local = values.get(("local", "path")) or [DEFAULT_LOCAL_PATH]
    return HeatSettings(
        collectors=tuple(collectors) or ("request", "local"),
        metadata_url=(values.get(("request", "metadata_url")) or [""])[-1],
        local_paths=tuple(local),
        heat_local_path=(values.get(("heat_local", "path")) or [DEFAULT_HEAT_LOCAL_PATH])[-1],
        polling_interval=max(1.0, polling),
        source=where,
    )


def settings_from_section(section: Any, base: HeatSettings) -> HeatSettings:
    """Apply a document's `os-collect-config` section (collectors, request, polling_interval)."""
    if not isinstance(section, dict):
        return base
    collectors = section.get("collectors")
    request = section.get("request") if isinstance(section.get("request"), dict) else {}
    url = request.get("metadata_url") if request else None
    interval = section.get("polling_interval")
    return HeatSettings(
        collectors=tuple(c for c in collectors if c in COLLECTORS)
        if isinstance(collectors, list)
        else base.collectors,
        metadata_url=url if isinstance(url, str) and url else base.metadata_url,
        local_paths=base.local_paths,
        heat_local_path=base.heat_local_path,
        polling_interval=float(interval) if isinstance(interval, (int, float)) else base.polling_interval,
        source=base.source,
        hook_dirs=base.hook_dirs,
    )


def save_settings(state_dir: Path, settings: HeatSettings) -> None:
    write_atomic(state_dir / SETTINGS_FILE, json.dumps(settings.to_json(), indent=2).encode())


def load_settings(state_dir: Path) -> HeatSettings | None:
    path = state_dir / SETTINGS_FILE
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON: {e}") from e
    for key in ("collectors", "local_paths", "hook_dirs"):
        raw[key] = tuple(raw.get(key) or ())
    try:
        return HeatSettings(**raw)
    except TypeError as e:
        raise ConfigError(f"{path}: {e}") from e


def settings_for(args: Any, state_dir: Path) -> HeatSettings | None:
    """Heat mode's settings from the command line, else from an earlier run; None when not in Heat mode."""
    if not getattr(args, "heat_compat", False):
        return load_settings(state_dir) if args.command != "enrol" else None
    path: Path | None = args.os_collect_config
    if path is not None:
        try:
            text = path.read_text()
        except OSError as e:
            raise ConfigError(f"--os-collect-config {path}: {e.strerror}") from e
        settings = parse_os_collect_config(text, str(path))
    else:
        settings = load_settings(state_dir) or HeatSettings(source="command line")
    if args.metadata_url:
        settings = HeatSettings(**{**settings.to_json(), "metadata_url": args.metadata_url})
    if args.hook_dir:
        settings = HeatSettings(**{**settings.to_json(), "hook_dirs": tuple(args.hook_dir)})
    if (
        not settings.metadata_url
        and "heat_local" not in settings.collectors
        and "local" not in settings.collectors
    ):
        raise ConfigError("--heat-compat needs a metadata URL (--metadata-url or [request] metadata_url)")
    state_dir.mkdir(parents=True, exist_ok=True)
    save_settings(state_dir, settings)
    return settings


def agent_config(settings: HeatSettings, hook_dirs: Sequence[str] | None) -> AgentConfig:
    """Our agent's settings for Heat mode: no control plane, no credential, no heartbeat."""
    cfg = AgentConfig(
        url="",
        server_id="",
        name="",
        credential="",
        document_url=settings.metadata_url,
        heartbeat_url="",
        document_policy="heat-compatible",
    )
    dirs = tuple(hook_dirs or settings.hook_dirs)
    return cfg.with_overrides(hook_dirs=dirs or None)


def _read_json_file(path: Path) -> dict[str, Any] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SourceNotAvailableError(f"{path}: {e}") from e
    try:
        obj = wire.loads_capped(raw, wire_caps.MAX_DOCUMENT_BYTES, str(path))
    except wire.WireError as e:
        raise DocumentRejectedError(str(e)) from e
    if not isinstance(obj, dict):
        raise DocumentRejectedError(f"{path}: expected a JSON object")
    return obj


def collect_local(paths: Sequence[str]) -> dict[str, Any]:
    """The `local` collector: every *.json file in the dirs, in C-locale name order, merged."""
    merged: dict[str, Any] = {}
    for directory in paths:
        d = Path(directory)
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir(), key=lambda p: p.name.encode()):
            if f.suffix == ".json" and f.is_file():
                obj = _read_json_file(f)
                if obj:
                    merged.update(obj)
    return merged


class HeatOutbox(Outbox):
    """Heat's signals: the flat form, to deploy_signal_id with deploy_signal_verb."""

    def compose(
        self, item_id: str, item: wire.DeploymentItem | None, meta: wire.ItemMeta | None, signal: wire.Signal
    ) -> Outgoing | None:
        """Heat's flat signal, to deploy_signal_id with deploy_signal_verb; nothing for NO_SIGNAL."""
        if item is None:
            return None
        transport = str(item.input_value("deploy_signal_transport") or "CFN_SIGNAL")
        url = item.input_value("deploy_signal_id")
        if transport == "NO_SIGNAL" or not isinstance(url, str) or not url:
            return None
        if transport not in HTTP_SIGNALS:
            log.error(
                "deployment %s: signal transport %s needs Keystone; anneal-agent cannot deliver it",
                item.name,
                transport,
            )
            return None
        verb = str(
            item.input_value("deploy_signal_verb") or ("PUT" if transport == "TEMP_URL_SIGNAL" else "POST")
        )
        body = wire.Signal(signal.status_code, signal.stdout, signal.stderr, signal.outputs).to_json()
        return Outgoing(0, item_id, url, verb.upper(), encode_body(body), 0)


class HeatAgent(Agent):
    """The agent reading Heat's documents from os-collect-config's sources."""

    outbox_class = HeatOutbox

    def __init__(
        self, settings: HeatSettings, state_dir: Path, hook_dirs: Sequence[str] | None = None
    ) -> None:
        super().__init__(agent_config(settings, hook_dirs), state_dir)
        self.settings = settings
        # Heat's documents are unsigned and carry no serial: the derived config id is the key.
        self.verifiers = []
        self._etag = ""

    # ------------------------------------------------------------ collecting

    async def _request(self, url: str) -> dict[str, Any] | None:
        headers = {"If-None-Match": self._etag} if self._etag else {}
        try:
            resp = await self._http.request(
                "GET", url, headers=headers, timeout=30, cap=wire_caps.MAX_DOCUMENT_BYTES
            )
        except (ClientError, TimeoutError) as e:
            raise SourceNotAvailableError(f"request collector: {e!r}") from e
        if resp.status == 304:
            return None
        if resp.status != 200:
            raise SourceNotAvailableError(f"request collector: {resp.status} from the metadata URL")
        body = resp.body
        self._etag = resp.headers.get("etag", "")
        try:
            obj = wire.loads_capped(body, wire_caps.MAX_DOCUMENT_BYTES, "metadata")
        except wire.WireError as e:
            raise DocumentRejectedError(str(e)) from e
        if not isinstance(obj, dict):
            raise DocumentRejectedError("metadata: expected a JSON object")
        return obj

    async def collect(self) -> dict[str, Any]:
        """Merge the collectors' documents in their configured order (later wins)."""
        merged: dict[str, Any] = {}
        settings = self.settings
        for name in settings.collectors:
            if name == "heat_local":
                found = _read_json_file(Path(settings.heat_local_path))
                if found:
                    merged.update(found)
                    # Heat's bootstrap: the boot metadata names the real metadata URL.
                    settings = settings_from_section(found.get("os-collect-config"), settings)
            elif name == "local":
                merged.update(collect_local(settings.local_paths))
            elif name == "request" and settings.metadata_url:
                got = await self._request(settings.metadata_url)
                if got is None:  # unchanged: keep what we accepted last
                    last = self.ledger.get_state("document")
                    got = json.loads(last) if last else {}
                merged.update(got)
        if settings != self.settings:
            self.settings = settings
            save_settings(self.state_dir, settings)
        return merged

    async def poll(self, wait: float) -> bool:
        merged = await self.collect()
        if "deployments" not in merged:
            return False
        body = wire.canonical_json(merged)
        if body.decode() == (self.ledger.get_state("document") or ""):
            return False
        try:
            doc = wire.decode_document(body)
        except wire.WireError as e:
            raise DocumentRejectedError(f"malformed Heat document: {e}") from e
        items = [
            {
                "item_id": d.id,
                "deployment_id": "",
                "generation": 0,
                "name": d.name,
                "hash": "",
                "action": str(d.input_value("deploy_action") or ""),
            }
            for d in doc.deployments
        ]
        self.ledger.accept_document(doc.serial, body, items)
        self.ledger.set_state("heat_compat", "1")
        log.info("accepted Heat document with %d deployments (Heat's rule: derived config ids)", len(items))
        self._work.set()
        return True

    async def _poll_loop(self) -> None:
        # Like os-collect-config: start at 1 s and double up to the polling interval.
        delay = 1.0
        while True:
            try:
                await self.poll(0)
            except (SourceNotAvailableError, DocumentRejectedError) as e:
                log.warning("collect failed: %s", e)
            await asyncio.sleep(delay * random.uniform(0.9, 1.1))
            delay = min(self.settings.polling_interval, delay * 2)

    async def _heartbeat_loop(self) -> None:
        """Heat has no heartbeat endpoint."""
        await asyncio.Event().wait()

    def status(self) -> dict[str, Any]:
        out = super().status()
        out["mode"] = "heat-compat"
        out["rule"] = RULE
        out["settings"] = self.settings.to_json()
        return out
