"""OS::Heat::RandomString: a secret string from the operating system's CSPRNG (``secrets``)."""

from __future__ import annotations

import secrets
import string
import uuid
from collections.abc import Mapping
from typing import Any

from control.errors import BadRequestError
from control.hot import taint
from control.resources.base import REPLACE, Outcome, Res, done
from control.store.orm import ResourceRow
from control.txn import Txn

CLASSES = {
    "lettersdigits": string.ascii_letters + string.digits,
    "letters": string.ascii_letters,
    "lowercase": string.ascii_lowercase,
    "uppercase": string.ascii_uppercase,
    "digits": string.digits,
    "hexdigits": string.digits + "abcdefABCDEF",
    "octdigits": string.octdigits,
}
DEFAULT_LENGTH = 32


def pools(props: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Each character pool with the least number of characters to draw from it.

    As Heat: ``character_classes`` and ``character_sequences`` each guarantee their
    ``min``; the deprecated ``sequence`` stands for one class when neither is given;
    with nothing given the class is ``lettersdigits``.
    """
    classes = list(props.get("character_classes") or [])
    sequences = list(props.get("character_sequences") or [])
    if not classes and not sequences:
        classes = [{"class": props.get("sequence") or "lettersdigits", "min": 1}]
    out = [(CLASSES[str(c.get("class") or "lettersdigits")], int(c.get("min") or 1)) for c in classes]
    out += [(str(s["sequence"]), int(s.get("min") or 1)) for s in sequences]
    return out


def generate(props: Mapping[str, Any], where: str) -> str:
    """A random string of ``length`` characters meeting every pool's minimum, in random order."""
    length = int(props.get("length") or DEFAULT_LENGTH)
    chosen = pools(props)
    if any(not pool for pool, _ in chosen):
        raise BadRequestError("a character sequence must not be empty", where=f"{where}.character_sequences")
    needed = sum(n for _, n in chosen)
    if needed > length:
        raise BadRequestError(
            f"length {length} is shorter than the {needed} characters the minimums ask for",
            where=f"{where}.length",
        )
    chars = [secrets.choice(pool) for pool, n in chosen for _ in range(n)]
    union = "".join(sorted({c for pool, _ in chosen for c in pool}))
    chars += [secrets.choice(union) for _ in range(length - needed)]
    secrets.SystemRandom().shuffle(chars)
    return "".join(chars)


class RandomString:
    """The value is made once; any property change makes a new one (Heat: properties replace)."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return done(str(uuid.uuid4()), value=taint.Secret(generate(props, f"{res.where}.properties")))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        if await self.replacement(txn, res, row, props) is None:
            return done(row.physical_id, **row.attributes)
        return REPLACE

    async def replacement(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> str | None:
        if row.properties == props and "value" in row.attributes:
            return None
        return "a random string is made once: any change makes a new one"

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return done()
