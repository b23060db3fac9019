"""What a template resource gives its nested stack: one shared template per group, digests unchanged."""

from __future__ import annotations

import hashlib
import json
import re

from control.hot import Nesting, parse_template
from control.resources import nested, provider

CHILD = {
    "heat_template_version": "2018-08-31",
    "parameters": {"size": {"type": "number", "default": 1}},
    "resources": {"inner": {"type": "OS::Heat::Value", "properties": {"value": {"get_param": "size"}}}},
    "outputs": {"doubled": {"value": {"get_attr": ["inner", "value"]}}},
}


def old_digest(*parts: object) -> str:
    """The digest as stored by earlier releases: resources compare their nested stacks by it."""
    return hashlib.sha256(
        json.dumps(parts, sort_keys=True, default=str, separators=(",", ":")).encode()
    ).hexdigest()


def test_a_digest_is_the_same_whether_a_part_comes_dumped_or_not():
    """A part given as its JSON text (a group's shared template) digests as the value itself did, so
    a stack stored before keeps its digests and no member is updated for nothing after an upgrade."""
    parts = (CHILD, {"child.yaml": "text"}, {"parameter_defaults": {"a": [1, None]}}, 1, 5)
    assert nested.digest(*parts) == old_digest(*parts)
    assert nested.digest(nested.dumped(CHILD), *parts[1:]) == old_digest(*parts)
    assert nested.digest(nested.dumped({**CHILD, "description": "x"}), *parts[1:]) != old_digest(*parts)


def test_members_of_a_group_share_one_built_template_and_its_text():
    """Built once for every member reading the same source with the same wants, not once each."""
    parsed = parse_template(CHILD, nesting=Nesting(1, 5))
    wants = frozenset({("resource.inner.value",)})
    first = provider._child_template(CHILD, wants, parsed)
    again = provider._child_template(CHILD, wants, parsed)
    assert again[0] is first[0] and again[1] is first[1]
    assert first[1] == json.dumps(first[0], sort_keys=True, separators=(",", ":"))
    # The output that answers the parent's get_attr [member, resource.inner.value]:
    hidden = provider.hidden_output(["resource.inner.value"])
    assert first[0]["outputs"][hidden] == {"value": {"get_attr": ["inner", "value"]}}
    assert set(CHILD["outputs"]) == {"doubled"}  # the shared source is not written to


def test_other_wants_or_another_source_build_their_own_template():
    parsed = parse_template(CHILD, nesting=Nesting(1, 5))
    plain = provider._child_template(CHILD, None, parsed)
    wanting = provider._child_template(CHILD, frozenset({("resource.inner",)}), parsed)
    assert plain[0] is not wanting[0]
    assert list(plain[0]["outputs"]) == ["doubled"]
    other = {**CHILD, "description": "another file with the same content but one line"}
    assert provider._child_template(other, None, parsed)[0]["description"] == other["description"]


def test_the_kept_templates_are_bounded():
    parsed = parse_template(CHILD, nesting=Nesting(1, 5))
    sources = [{**CHILD, "description": str(i)} for i in range(provider.BUILT_KEPT + 5)]
    for source in sources:
        provider._child_template(source, None, parsed)
    assert len(provider._BUILT) == provider.BUILT_KEPT


def test_a_short_id_is_twelve_base32_characters_as_heats():
    ids = {nested.short_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[a-z2-7]{12}", i) for i in ids)
