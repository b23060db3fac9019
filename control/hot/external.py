"""``external_id`` on a resource: adopt something that exists instead of creating it (Heat, newton on).

As in Heat, the resource's properties are not used, it depends on no other resource, an
update never changes it and may not change its ``external_id``, and deleting the stack
leaves the thing alone. What can be adopted here: a server (OS::Nova::Server,
OS::Heat::DeployedServer) that exists in this control plane, by id or name, a software
config of the stack's project by id (the config types: Heat's have an entity to look up),
and anything mapped to OS::Heat::None (its reference is the id given). Other types have
nothing here to adopt and are refused at the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.hot.errors import TemplateError, at
from control.hot.functions import call_of, references
from control.hot.versions import check_version

SINCE = "2016-10-14"
CONFIGS = (
    "OS::Heat::SoftwareConfig",
    "OS::Heat::StructuredConfig",
    "OS::Heat::SoftwareComponent",
    "OS::Heat::CloudConfig",
    "OS::Heat::MultipartMime",
)
ADOPTABLE = ("OS::Nova::Server", "OS::Heat::DeployedServer", "OS::Heat::None", *CONFIGS)
#: Where a resource row keeps the external_id it was adopted by (an update may not change it).
KEPT = "anneal:external_id"


def checked(body: Mapping[str, Any], rtype: str, path: str, version: str) -> Any:
    """The resource's ``external_id`` as written (None without one), checked by Heat's rules."""
    value = body.get("external_id")
    if value is None:
        return None
    where = at(path, "external_id")
    check_version("external_id", SINCE, version, where)
    if call_of(value) is None and (not isinstance(value, str) or not value):
        raise TemplateError(where, "expected the id of the existing resource (a non-empty string)")
    if rtype not in ADOPTABLE:
        raise TemplateError(
            where,
            f"{rtype} has nothing here to adopt: external_id is supported on {', '.join(ADOPTABLE[:2])} "
            "(an existing server of this control plane, by id or name), on the software config types "
            "(an existing config, by id) and on types mapped to OS::Heat::None",
        )
    needs = set(references(value)) | set(references(body.get("properties")))
    if body.get("depends_on") or needs:
        raise TemplateError(where, "an external resource cannot depend on other resources (Heat's rule)")
    return value
