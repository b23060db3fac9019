"""Agent-facing use cases: enrolment, credentials, heartbeats, scope."""

from __future__ import annotations

import base64
import ipaddress
import time
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select, update

from agent import wire
from control.documents import heat, seal
from control.errors import AuthError, BadRequestError, ConflictError, ControlError, GoneError, NotFoundError
from control.hot import taint
from control.hot.names import name_problem
from control.keys import new_token, token_hash
from control.principal import DEFAULT_PROJECT, Within
from control.resources import create_server
from control.resources.servers import refresh_addresses
from control.runtime import Runtime
from control.services import drift, rebuild
from control.signals import batch, progress, scope
from control.store import names
from control.store.orm import DeploymentRow, ServerRow
from control.transports.publisher import arrived_via, assign, published_section
from control.txn import Txn

KEY_KINDS = ("sign", "box")
#: A heartbeat's ledger report is kept only up to this many items.
MAX_LEDGER_ITEMS = 10_000


async def create_server_record(
    rt: Runtime,
    name: Any,
    transport: Any = None,
    heat_compatible: Any = False,
    project: str = DEFAULT_PROJECT,
) -> dict[str, Any]:
    """A server awaiting enrolment, and the one-time token its agent enrols with.

    A Heat-compatible server runs Heat's own agent chain: it gets a metadata URL instead.
    """
    problem = name_problem(name, "server")
    if problem is not None:
        raise BadRequestError(f"name: {problem}", where="name")
    if not isinstance(heat_compatible, bool):
        raise BadRequestError("heat_compatible: expected true or false", where="heat_compatible")
    if heat_compatible and transport is not None:
        raise BadRequestError(
            "transport: a Heat-compatible server reads its metadata URL with Heat's own agent chain;"
            " leave transport out (or null)",
            where="transport",
        )
    async with rt.sessions() as session:
        if await names.taken(session, ServerRow, name, project):
            raise ConflictError(f"server {name!r} already exists", where="name")
        txn = Txn(session, rt)
        server, token = await create_server(txn, name, owner_stack_id=None, project=project)
        if heat_compatible:
            server.agent_kind, server.status = heat.HEAT_AGENT, "HEAT_COMPATIBLE"
            server.enrol_token_hash, server.enrol_expires = None, None
        elif transport is not None:
            assign(txn, server, transport, "transport")
        await txn.commit()
        if heat_compatible:
            return {
                "id": server.id,
                "name": server.name,
                "status": server.status,
                **heat.heat_view(rt, server),
            }
        return {
            "id": server.id,
            "name": server.name,
            "status": server.status,
            "transport": server.transport,
            "enrol_token": token,
        }


async def set_transport(rt: Runtime, ref: str, transport: Any, *, within: Within) -> dict[str, Any]:
    """Move a server to another transport (docs/transports.md, switching)."""
    async with rt.sessions() as session:
        server = await names.find(session, ServerRow, ref, within)
        txn = Txn(session, rt)
        assign(txn, server, transport, "transport")
        result = {
            "id": server.id,
            "name": server.name,
            "transport": server.transport,
            "transport_previous": [k for k in server.transport_previous.split(",") if k],
        }
        await txn.commit()
        return result


async def issue_token(rt: Runtime, ref: str, *, within: Within) -> dict[str, Any]:
    """A new one-time enrolment token for a server (a stack-made one, or a rebuilt server)."""
    async with rt.sessions() as session:
        server = await names.find(session, ServerRow, ref, within)
        token = new_token()
        server.enrol_token_hash = token_hash(token)
        server.enrol_expires = time.time() + rt.settings.enrol_token_ttl
        await session.commit()
        return {"id": server.id, "name": server.name, "status": server.status, "enrol_token": token}


async def enrol(rt: Runtime, body: Mapping[str, Any]) -> dict[str, Any]:
    """Exchange a one-time token and the server's public keys for the agent's credential."""
    token = body.get("token")
    if not isinstance(token, str) or not token:
        raise BadRequestError("token: the enrolment token is required", where="token")
    keys = body.get("public_keys")
    if not isinstance(keys, Mapping):
        raise BadRequestError("public_keys: expected an object with sign and box keys", where="public_keys")
    for kind in KEY_KINDS:
        _check_key(keys.get(kind), f"public_keys.{kind}")
    found = read_addresses(body.get("addresses", []), "addresses")
    async with rt.sessions() as session:
        server = await session.scalar(
            select(ServerRow).where(ServerRow.enrol_token_hash == token_hash(token))
        )
        if server is None:
            raise AuthError("enrolment token is unknown or already used", where="token")
        if server.enrol_expires is not None and server.enrol_expires < time.time():
            raise AuthError(f"enrolment token of server {server.name} has expired", where="token")
        new_keys = {k: keys[k] for k in KEY_KINDS}
        if rebuild.is_rebuild(server, new_keys):  # the state dir was lost: decide, visibly
            # Same transaction as the enrolment; the serial bump and publish below cover it.
            txn = Txn(session, rt)
            record = await rebuild.rerun_as_new(txn, server, new_keys)
            await txn.write_events()  # committed with the enrolment below
            server.rebuilds = [*(server.rebuilds or []), record]
        credential = new_token()
        if server.credential_hash:  # every process stops accepting it within credentials.BOUND
            await rt.credentials.revoke(session, server.credential_hash)
        server.credential_hash = token_hash(credential)
        server.enrol_token_hash, server.enrol_expires = None, None
        server.public_keys = {k: keys[k] for k in KEY_KINDS}
        server.status, server.enrolled_at, server.last_seen = "ENROLLED", time.time(), time.time()
        server.agent_status = {**(server.agent_status or {}), "addresses": found}
        txn = Txn(session, rt)
        await refresh_addresses(txn, server.id, found)
        # Secrets in the document are sealed to the box key just given: render it anew.
        server.serial, server.serial_at = server.serial + 1, time.time()
        await txn.commit()
        rt.credentials.remember(server.credential_hash, server.id)
        await rt.publish([server.id])
        base = rt.settings.base_url
        return {
            "server_id": server.id,
            "name": server.name,
            "credential": credential,
            "document_url": f"{base}/v1/agent/document",
            "heartbeat_url": f"{base}/v1/agent/heartbeat",
            "control_public_key": rt.keys.public_key_b64,
            # Where the first document comes from: the assigned store, not where the agent enrolled.
            "transport": published_section(rt.publisher, server.id),
        }


#: Addresses one report may carry.
MAX_ADDRESSES = 64


def read_addresses(value: Any, where: str) -> list[dict[str, Any]]:
    """An agent's address report, checked: ``[{interface, addr, version, mac}]``."""
    if not isinstance(value, list) or len(value) > MAX_ADDRESSES:
        raise BadRequestError(f"{where}: expected a list of at most {MAX_ADDRESSES} addresses", where=where)
    found = []
    for i, entry in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("interface"), str):
            raise BadRequestError(f"{at}: expected {{interface, addr, version, mac}}", where=at)
        try:
            addr = ipaddress.ip_address(str(entry.get("addr")))
        except ValueError:
            raise BadRequestError(
                f"{at}.addr: {entry.get('addr')!r} is not an IP address", where=f"{at}.addr"
            ) from None
        mac = entry.get("mac", "")
        found.append(
            {
                "interface": entry["interface"][:64],
                "addr": str(addr),
                "version": addr.version,
                "mac": str(mac)[:64],
            }
        )
    return found


def _check_key(value: Any, where: str) -> None:
    try:
        raw = base64.b64decode(value or "", validate=True)
    except (ValueError, TypeError) as e:  # binascii.Error is a ValueError; so is non-ASCII text
        raise BadRequestError(f"{where}: not base64", where=where) from e
    if len(raw) != 32:
        raise BadRequestError(f"{where}: expected a 32-byte raw public key", where=where)


async def authenticate(rt: Runtime, digest: str) -> str:
    """The server id the credential hashing to *digest* belongs to (cached at most BOUND: polls read no database)."""
    server_id = await rt.credentials.server_of(rt.sessions, digest)
    if server_id is None:
        raise AuthError("unknown or revoked agent credential", where="Authorization")
    return server_id


async def check_still_held(rt: Runtime, server_id: str, digest: str, since: float) -> None:
    """Refuse *digest* unless it is *server_id*'s by a revocation-counter read started after *since*."""
    if not await rt.credentials.held_since(rt.sessions, digest, server_id, since):
        raise AuthError("unknown or revoked agent credential", where="Authorization")


async def heartbeat(rt: Runtime, server_id: str, digest: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Note that the agent is alive; one UPDATE, which also checks the credential is still the server's."""
    status = {
        k: body[k]
        for k in ("version", "serial", "running", "queued", "generations", "rejections", "disk_full")
        if k in body
    }
    if isinstance(body.get("os"), str):
        status["os"] = body["os"][:200]  # os-release's name and the kernel, as the agent reads them
    ledger = body.get("ledger")
    if isinstance(ledger, dict) and len(ledger) <= MAX_LEDGER_ITEMS:
        status["ledger"] = ledger  # what `stack check` compares with the database
    status["reported_at"] = time.time()
    if "addresses" in body:
        status["addresses"] = read_addresses(body["addresses"], "addresses")
    async with rt.sessions() as session:
        serial = await session.scalar(
            update(ServerRow)
            .where(ServerRow.id == server_id, ServerRow.credential_hash == digest)
            .values(last_seen=time.time(), agent_status=status)
            .returning(ServerRow.serial)
        )
        # Check results (agent/checks.py) only after the credential proved to be the server's.
        acked = await drift.record(session, server_id, body["checks"]) if "checks" in body and serial else []
        if serial is not None and body.get("addresses_changed") is True:  # else nothing is read here
            txn = Txn(session, rt)
            await refresh_addresses(txn, server_id, status.get("addresses") or [])
            await txn.commit()
        else:
            await session.commit()
    if serial is None:  # revoked (the agent enrolled again) or the server removed
        raise AuthError("unknown or revoked agent credential", where="Authorization")
    if isinstance(body.get("transport"), str):
        await arrived_via(rt, server_id, body["transport"])
    return {"serial": serial, "checks": acked} if acked else {"serial": serial}


def check_signal_credential(
    rt: Runtime, deployment_id: str, generation: int, sig: str | None, server_id: str | None
) -> None:
    """Refuse a signal whose URL signature or agent credential does not cover this deployment."""
    try:
        scope.check_credential(rt.keys, deployment_id, generation, sig, server_id)
    except ControlError as e:
        rt.metrics.signals_refused.labels(e.code).inc()
        raise


async def record_signal(
    rt: Runtime,
    kick: Callable[[str], None],
    deployment_id: str,
    generation: int,
    body: Any,
    *,
    sig: str | None,
    server_id: str | None,
    credential: str | None = None,
) -> dict[str, Any]:
    """Store a deployment's result; duplicates are answered idempotently, stale ones refused.

    A progress signal (control/progress.py) is checked the same way and only recorded.
    *credential* is the hash of the agent credential that named *server_id*: it is
    checked again in the transaction applying the signal, so a revoked one applies nothing.
    Each signal is counted once in the process's metrics, taken (by outcome) or refused (by reason).
    """
    try:
        answer = await _record_signal(
            rt, kick, deployment_id, generation, body, sig=sig, server_id=server_id, credential=credential
        )
    except ControlError as e:
        rt.metrics.signals_refused.labels(e.code).inc()
        raise
    outcome = "progress" if answer.get("progress") else "duplicate" if answer.get("duplicate") else "applied"
    rt.metrics.signals_received.labels(outcome).inc()
    return answer


async def _record_signal(
    rt: Runtime,
    kick: Callable[[str], None],
    deployment_id: str,
    generation: int,
    body: Any,
    *,
    sig: str | None,
    server_id: str | None,
    credential: str | None = None,
) -> dict[str, Any]:
    # The credential first: a wrong one learns nothing, not even whether the deployment exists.
    scope.check_credential(rt.keys, deployment_id, generation, sig, server_id)
    signal = None
    if not progress.is_progress(body):
        try:
            signal = wire.decode_signal(body)
        except wire.WireError as e:
            raise BadRequestError(str(e), where="signal") from e
    if signal is not None:
        # Applied with the other signals arriving meanwhile, in one transaction; answered after it commits.
        return await batch.batch_for(rt).apply(
            kick, deployment_id, generation, signal, sig=sig, server_id=server_id, credential=credential
        )
    async with rt.sessions() as session:
        dep = await session.get(DeploymentRow, deployment_id)
        if dep is None and sig is not None:
            raise GoneError(f"deployment {deployment_id} no longer exists", where="deployment")
        if dep is None:
            raise NotFoundError(f"deployment {deployment_id!r} not found", where="deployment")
        scope.check_owner(dep, sig, server_id)
        if credential is not None:
            held = await session.scalar(select(ServerRow.credential_hash).where(ServerRow.id == server_id))
            scope.check_held(held, credential)
        value = progress.apply_progress(dep, generation, body)
        if value is not None:  # kept and shown masked: the tail is what the hook printed
            stack = await seal.stack_texts(session, [dep.stack_id] if dep.stack_id else [])
            secrets = seal.texts_for(dep.item, stack.get(dep.stack_id or "", ()))
            value["output_tail"] = taint.mask_text(value["output_tail"], secrets)
        before = (dep.progress or {}).get("retry") if dep.progress else None
        recorded = value is not None and await progress.store_progress(session, dep, generation, value)
        if recorded and value is not None and dep.stack_id:
            await progress.note_retry(Txn(session, rt), dep, generation, value, before)
        return {
            "deployment_id": dep.id,
            "generation": generation,
            "status": dep.status,
            "duplicate": not recorded,
            "progress": True,
        }
