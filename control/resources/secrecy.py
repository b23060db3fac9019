"""Where a resource's properties may hold a secret: the handler carries it through, sealed and masked.

A property a handler reads to name or choose something (a server, a config id, the
actions, a length) would have to be shown in clear, in the resource's attributes, its
status or the document: a secret there is refused, naming the property. Elsewhere a
secret goes on as a Secret (``control/hot/taint.py``): a config body, a config input's
default, a deployment's input values, an ``OS::Heat::Value``'s value, cloud-config
data, a MIME part.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from control.errors import BadRequestError
from control.hot import taint

ANY = "*"
_CONFIG = (("config",), ("inputs", ANY, "default"))
_INPUTS = (("input_values", ANY),)
#: Paths (map keys or list items; ANY matches one step) under which a Secret may be.
CARRIERS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "OS::Heat::None": ((ANY,),),
    "OS::Heat::Value": (("value",),),
    "OS::Heat::SoftwareConfig": _CONFIG,
    "OS::Heat::StructuredConfig": _CONFIG,
    "OS::Heat::SoftwareComponent": (("configs", ANY, "config"), ("inputs", ANY, "default")),
    "OS::Heat::CloudConfig": (("cloud_config",),),
    "OS::Heat::MultipartMime": (("parts", ANY, "config"),),
    "OS::Heat::SoftwareDeployment": _INPUTS,
    "OS::Heat::StructuredDeployment": _INPUTS,
    "OS::Heat::SoftwareDeploymentGroup": _INPUTS,
    "OS::Heat::StructuredDeploymentGroup": _INPUTS,
    "OS::Heat::RandomString": (),
    # Nova's admin_pass, user_data, metadata... are kept (encrypted), never shown or used.
    "OS::Heat::DeployedServer": ((ANY,),),
    "OS::Nova::Server": ((ANY,),),
    "AWS::EC2::Instance": ((ANY,),),
}
#: Properties a handler reads even where CARRIERS says ANY.
PLAIN: Mapping[str, frozenset[str]] = {
    "OS::Heat::DeployedServer": frozenset({"name", "software_config_transport"}),
    "OS::Nova::Server": frozenset({"name", "software_config_transport"}),
    "AWS::EC2::Instance": frozenset({"AvailabilityZone"}),
}


def check_carriers(type_name: str, props: Any, where: str) -> None:
    """Refuse a secret in a property of *type_name* that cannot carry one (BadRequestError naming it)."""
    if not taint.tainted(props):
        return
    allowed, plain = CARRIERS.get(type_name, ()), PLAIN.get(type_name, frozenset())
    for path in _secret_paths(props, ()):
        if (path and path[0] in plain) or not any(_under(path, pattern) for pattern in allowed):
            shown = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
            places = ", ".join(".".join(p) for p in allowed) or "nowhere"
            raise BadRequestError(
                f"{shown}: a value derived from a hidden parameter or a random string cannot be used "
                f"here (it would be shown in clear); in {type_name} it may go in: {places}",
                where=shown,
            )


def _under(path: tuple[str | int, ...], pattern: tuple[str, ...]) -> bool:
    """Whether *path* lies at or below *pattern*."""
    return len(path) >= len(pattern) and all(
        p in (ANY, str(k)) for p, k in zip(pattern, path[: len(pattern)], strict=True)
    )


def _secret_paths(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, taint.Secret):
        yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _secret_paths(item, (*path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _secret_paths(item, (*path, i))
