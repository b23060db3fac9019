"""Offline enrolment over media, and the check of signed signal files (docs/transports.md, LOCAL).

* :func:`media_bundle`: what `anneal server media NAME DIR` writes to ``DIR/enrol.json``:
  the server's id, the control plane's public key and a fresh one-time token.
* :func:`import_enrolment`: the agent's request carried back (``enrol.<server id>.json``):
  its self-signature must verify with the sign key it carries, the token must be the
  server's own, unexpired and unused; then it is the ordinary enrolment
  (`control.services.agents.enrol`) without the credential, which nobody ever needs.
* :func:`open_signal_file`: a signal file from media must be the envelope the agent
  signed with the sign key the server enrolled, naming this server and this deployment
  generation; otherwise it is refused, naming why.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from agent import wire, wire_caps
from agent.transports import offline
from control.errors import AuthError, BadRequestError, ConflictError, ForbiddenError, NotFoundError
from control.keys import new_token, token_hash
from control.principal import Within
from control.runtime import Runtime
from control.services import agents
from control.store import names
from control.store.orm import ServerRow
from control.transports.publisher import published_section
from control.transports.store import signal_name


async def media_bundle(rt: Runtime, ref: str, *, within: Within) -> dict[str, Any]:
    """A new one-time token for a LOCAL server, packed with what its agent pins (replaces any earlier token)."""
    async with rt.sessions() as session:
        server = await names.find(session, ServerRow, ref, within)
        if server.transport != "LOCAL":  # the server's state, not the request, is wrong: 409
            raise ConflictError(
                f"server {server.name} is on transport {server.transport}; offline enrolment needs LOCAL "
                f"(`anneal server transport {server.name} LOCAL`)",
                where="transport",
            )
        if server.status == "ENROLLED":
            raise ConflictError(
                f"server {server.name} is already enrolled; a new bundle would re-enrol it with new keys "
                "(use `anneal server token` and re-enrol deliberately if its state dir was lost)",
                where="server",
            )
        token = new_token()
        server.enrol_token_hash = token_hash(token)
        server.enrol_expires = time.time() + rt.settings.enrol_token_ttl
        await session.commit()
        server_id, name, expires = server.id, server.name, server.enrol_expires
    section = published_section(rt.publisher, server_id)
    if section.get("kind") != "LOCAL":
        section = {"kind": "LOCAL", "poll_interval": rt.settings.store_poll_interval, "signals": {}}
    return {
        "format": offline.BUNDLE_FORMAT,
        "server_id": server_id,
        "name": name,
        "control_public_key": rt.keys.public_key_b64,
        "enrol_token": token,
        "enrol_expires": expires,
        "transport": section,
    }


def _check_request(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or body.get("format") != offline.REQUEST_FORMAT:
        raise BadRequestError(
            f"not an enrolment request (format must be {offline.REQUEST_FORMAT!r})", where="format"
        )
    for field in ("server_id", "enrol_token", "signature"):
        if not isinstance(body.get(field), str) or not body[field]:
            raise BadRequestError(f"{field}: a non-empty string is required", where=field)
    keys = body.get("public_keys")
    if not isinstance(keys, Mapping):
        raise BadRequestError("public_keys: expected an object with sign and box keys", where="public_keys")
    for kind in agents.KEY_KINDS:
        agents._check_key(keys.get(kind), f"public_keys.{kind}")
    # Proof of possession, and that nothing in the request changed since the agent wrote it.
    if not offline.verify(str(keys["sign"]), body["signature"], offline.request_message(body)):
        raise AuthError(
            "signature: does not verify with the request's own sign key (the request was changed, "
            "or was not written by an agent)",
            where="signature",
        )
    return body


async def import_enrolment(rt: Runtime, body: Any) -> dict[str, Any]:
    """Enrol the server a carried-back request names; a repeat of the imported request is a duplicate."""
    request = _check_request(body)
    server_id, keys = request["server_id"], {k: request["public_keys"][k] for k in agents.KEY_KINDS}
    async with rt.sessions() as session:
        server = await session.get(ServerRow, server_id)
        if server is None:
            raise NotFoundError(f"server {server_id!r} not found", where="server_id")
        if server.status == "ENROLLED" and server.public_keys == keys:
            return {"server_id": server.id, "name": server.name, "status": server.status, "duplicate": True}
        owner = await session.scalar(
            select(ServerRow.id).where(ServerRow.enrol_token_hash == token_hash(request["enrol_token"]))
        )
    if owner is None:
        raise AuthError(
            f"enrol_token: unknown or already used for server {server_id} (a request with other keys may "
            "have been imported first: check `anneal server show`)",
            where="enrol_token",
        )
    if owner != server_id:
        raise ForbiddenError(f"enrol_token: belongs to another server, not {server_id}", where="enrol_token")
    answer = await agents.enrol(rt, {"token": request["enrol_token"], "public_keys": keys})
    return {
        "server_id": answer["server_id"],
        "name": answer["name"],
        "status": "ENROLLED",
        "duplicate": False,
    }


async def open_signal_file(
    rt: Runtime, server_id: str, deployment_id: str, generation: int, body: bytes
) -> bytes:
    """The signal inside a signed signal file, checked against *server_id*'s enrolled sign key."""
    where = f"signal {deployment_id}/{generation}"
    try:
        envelope = wire.loads_capped(body, wire_caps.MAX_SIGNAL_BYTES, where)
    except wire.WireError as e:
        raise BadRequestError(str(e), where="signal") from e
    if not isinstance(envelope, dict) or envelope.get("format") != offline.SIGNAL_FORMAT:
        raise AuthError(
            f"{where}: not a signed signal file (format must be {offline.SIGNAL_FORMAT!r}); media signals "
            "are accepted only as written by the server's agent",
            where="signal",
        )
    name = signal_name(deployment_id, generation)
    if envelope.get("name") != name:
        raise ForbiddenError(
            f"{where}: the file is signed for {envelope.get('name')!r}, not {name}", where="name"
        )
    if envelope.get("server_id") != server_id:
        raise ForbiddenError(
            f"{where}: signed for server {envelope.get('server_id')!r}, but the deployment is on {server_id}",
            where="server_id",
        )
    signal = envelope.get("signal")
    if not isinstance(signal, str):
        raise BadRequestError(f"{where}: signal must be the signal's JSON text", where="signal")
    async with rt.sessions() as session:
        server = await session.get(ServerRow, server_id)
        sign_key = (server.public_keys or {}).get("sign") if server is not None else None
    if not sign_key:
        raise AuthError(f"{where}: server {server_id} has no enrolled sign key", where="server_id")
    if not offline.verify(
        str(sign_key), envelope.get("signature"), offline.signal_message(server_id, name, signal)
    ):
        raise AuthError(
            f"{where}: signature does not verify with server {server_id}'s key (changed on the way, or not "
            "written by its agent)",
            where="signature",
        )
    return signal.encode()
