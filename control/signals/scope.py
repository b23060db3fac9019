"""What a signal may do: its credential's scope, and which signals count as answers.

A signal URL's ``sig`` is an HMAC over one deployment and one generation: it can
post that generation's result and nothing else (no reads, no other deployment, no
other generation, no exchange for another credential). An agent's own credential
can signal only deployments on its server. A signal names its generation (in the
URL, and in ``anneal.generation`` of the body) and carries a nonce: a repeat with
the same nonce is answered as before, a different answer to a generation already
answered is refused, and a generation that is not current is stale (409).
"""

from __future__ import annotations

import logging

from agent import wire
from control.errors import AuthError, BadRequestError, ConflictError, ForbiddenError, StaleSignalError
from control.keys import Keys
from control.store.orm import DeploymentRow

log = logging.getLogger(__name__)


def check_credential(
    keys: Keys, deployment_id: str, generation: int, sig: str | None, server_id: str | None
) -> None:
    """Refuse a signal whose URL signature or agent credential does not cover this deployment."""
    if sig is not None:
        if not keys.check_signal_signature(deployment_id, generation, sig):
            # An audit line; the signature itself is never logged.
            log.warning(
                "refused signal for deployment %s generation %s: wrong signature", deployment_id, generation
            )
            raise ForbiddenError(
                "signal signature does not match this deployment and generation", where="sig"
            )
    elif server_id is None:
        raise AuthError("a signal needs its URL's signature or the agent's credential", where="Authorization")


def check_held(held: str | None, credential: str) -> None:
    """Refuse an agent credential the database no longer holds for its server (revoked since)."""
    if held != credential:
        raise AuthError("unknown or revoked agent credential", where="Authorization")


def check_owner(dep: DeploymentRow, sig: str | None, server_id: str | None) -> None:
    if sig is None and server_id != dep.server_id:
        log.warning("refused signal for deployment %s from the agent of server %s", dep.id, server_id)
        raise ForbiddenError(f"deployment {dep.id} belongs to another server", where="deployment")


def check_generation(dep: DeploymentRow, generation: int) -> None:
    """Refuse a signal (result or progress) for a generation that is not *dep*'s current one."""
    if generation < dep.generation:
        raise StaleSignalError(
            f"generation {generation} of deployment {dep.id} is stale; current is {dep.generation}",
            where="generation",
        )
    if generation > dep.generation:
        raise StaleSignalError(
            f"deployment {dep.id} has no generation {generation} yet (current {dep.generation})",
            where="generation",
        )


def check_answer(dep: DeploymentRow, generation: int, signal: wire.Signal) -> None:
    """Refuse a signal whose body contradicts its URL or answers a generation already answered."""
    claimed = signal.extra.get("generation")
    if claimed is not None and claimed != generation:
        raise BadRequestError(
            f"the body answers generation {claimed!r} but was sent to generation {generation}",
            where="anneal.generation",
        )
    if generation != dep.generation:
        return  # check_generation refuses it as stale, with the current generation
    config_id = signal.extra.get("config_id")
    if config_id and dep.item_id and config_id != dep.item_id:
        raise StaleSignalError(
            f"the signal answers derived config {config_id}, but generation {generation} of deployment "
            f"{dep.id} runs {dep.item_id}",
            where="anneal.config_id",
        )
    nonce = signal.extra.get("nonce")
    if dep.status != "IN_PROGRESS" and nonce and dep.signal_nonce and nonce != dep.signal_nonce:
        raise ConflictError(
            f"generation {generation} of deployment {dep.id} was already answered by another signal; "
            "this one is ignored",
            where="anneal.nonce",
        )
