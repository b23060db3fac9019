"""Environment files: sections, merging and the resource_registry."""

from __future__ import annotations

import pytest

from control.hot import (
    Environment,
    TemplateError,
    child_environment,
    hooks_for,
    map_type,
    merge_environments,
    parse_environment,
)


def env_error(text: str) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        parse_environment(text, "environments[0]")
    return info.value


def test_parse_all_sections():
    """parameters, parameter_defaults and resource_registry are read; the rest ignored."""
    env = parse_environment(
        "parameters: {port: 80}\n"
        "parameter_defaults: {name: web}\n"
        "resource_registry: {'OS::Neutron::*': OS::Heat::None}\n"
        "encrypted_param_names: [pw]\n"
        "event_sinks: [{type: zaqar-queue}]\n"
    )
    assert env == Environment(
        parameters={"port": 80},
        parameter_defaults={"name": "web"},
        resource_registry={"OS::Neutron::*": "OS::Heat::None"},
    )


def test_empty_environment():
    """An empty file is an empty environment."""
    assert parse_environment("") == Environment()
    assert parse_environment("# nothing\n") == Environment()


def test_unknown_section_is_named():
    """A section that environments do not have is refused, naming it."""
    e = env_error("paramters: {a: 1}\n")
    assert e.path == "environments[0].paramters" and "unknown section" in e.reason


def test_environment_must_be_a_map():
    """A list is not an environment."""
    assert env_error("- a\n").path == "environments[0]"


def test_section_must_be_a_map():
    """parameters must be a map."""
    assert env_error("parameters: [a]\n").path == "environments[0].parameters"


def test_yaml_errors_name_the_environment():
    """A YAML error names the environment and the line."""
    e = env_error("parameters: {a: 1\n")
    assert e.path == "environments[0]" and "line" in e.reason


@pytest.mark.parametrize(
    "target",
    ["my_server.yaml", "https://example.com/t.yaml", "templates/net.template", "file:///x.yaml"],
)
def test_registry_entries_may_name_templates(target):
    """A registry entry may map a type name to a template file (a template resource)."""
    env = parse_environment(f"resource_registry: {{'OS::TripleO::Server': '{target}'}}\n")
    assert env.resource_registry == {"OS::TripleO::Server": target}
    assert map_type(env, "OS::TripleO::Server") == target


def test_per_resource_entries_map_types_for_that_resource_only():
    """resources: {name: {Type: target}} maps the type for that resource (or a glob of names) only."""
    env = parse_environment(
        "resource_registry:\n"
        "  OS::Heat::Thing: OS::Heat::None\n"
        "  resources:\n"
        "    db: {OS::Heat::Thing: db.yaml}\n"
        "    '*_web': {OS::Heat::Thing: web.yaml}\n"
    )
    assert map_type(env, "OS::Heat::Thing", "db") == "db.yaml"
    assert map_type(env, "OS::Heat::Thing", "front_web") == "web.yaml"
    assert map_type(env, "OS::Heat::Thing", "other") == "OS::Heat::None"
    assert map_type(env, "OS::Heat::Thing") == "OS::Heat::None"


def test_hooks_are_kept_per_resource_and_matched_by_glob():
    """pre-create and pre-update are kept (a name or a list); a glob entry's hooks apply to the names it matches."""
    env = parse_environment(
        "resource_registry:\n  resources:\n    web: {hooks: pre-create}\n"
        '    "w*": {hooks: [pre-update]}\n    db: {hooks: [pre-delete, post-create]}\n'
    )
    assert env.resources["web"] == {"hooks": ["pre-create"]}
    assert hooks_for(env, "web") == {"pre-create", "pre-update"}
    assert hooks_for(env, "worker") == {"pre-update"}
    assert hooks_for(env, "db") == frozenset() and hooks_for(env, "other") == frozenset()
    assert len(env.warnings) == 2 and all("resources.db.hooks" in w for w in env.warnings)
    assert "pre-delete does not pause" in env.warnings[0]


@pytest.mark.parametrize(
    ("hooks", "problem"),
    [("pre-creat", "unknown hook 'pre-creat'"), ("{a: 1}", "expected a hook name or a list of them")],
)
def test_a_bad_hook_is_refused_at_its_path(hooks: str, problem: str) -> None:
    """A misspelt hook or a map where hooks go is a TemplateError naming the entry's path."""
    with pytest.raises(TemplateError) as refused:
        parse_environment(f"resource_registry:\n  resources:\n    web: {{hooks: {hooks}}}\n")
    assert "environment.resource_registry.resources.web.hooks" in str(refused.value)
    assert problem in str(refused.value)


def test_nested_per_resource_entries_go_down_to_the_nested_stack():
    """An entry under a resource's name applies inside the stack that resource makes."""
    env = parse_environment(
        "parameters: {a: 1}\nparameter_defaults: {b: 2}\n"
        "resource_registry:\n  resources:\n    outer:\n      inner: {OS::Heat::Thing: deep.yaml}\n"
    )
    child = child_environment(env, "outer")
    assert child.parameters == {} and child.parameter_defaults == {"b": 2}
    assert map_type(child, "OS::Heat::Thing", "inner") == "deep.yaml"
    assert child_environment(env, "elsewhere").resources == {}


def test_per_resource_entry_must_be_a_map():
    """A per-resource entry that is not a map is refused at its path."""
    e = env_error("resource_registry:\n  resources:\n    web: OS::Heat::None\n")
    assert e.path == "environments[0].resource_registry.resources.web"


def test_registry_values_must_be_type_names():
    """A non-string registry value is refused."""
    assert "expected a resource type name" in env_error("resource_registry: {A::B: 5}\n").reason


def test_merge_later_wins_key_by_key():
    """merge_environments merges maps key by key, later environments winning."""
    a = Environment(parameters={"x": 1, "y": 1}, parameter_defaults={"d": 1}, resource_registry={"A": "B"})
    b = Environment(parameters={"y": 2}, resource_registry={"C": "D"})
    merged = merge_environments([a, b])
    assert merged == Environment(
        parameters={"x": 1, "y": 2}, parameter_defaults={"d": 1}, resource_registry={"A": "B", "C": "D"}
    )
    assert merge_environments([]) == Environment()


def test_map_type_exact_then_glob_then_unchanged():
    """An exact entry wins over a glob; unmatched types are unchanged."""
    env = Environment(
        resource_registry={"OS::Neutron::*": "OS::Heat::None", "OS::Neutron::Port": "OS::Heat::Value"}
    )
    assert map_type(env, "OS::Neutron::Port") == "OS::Heat::Value"
    assert map_type(env, "OS::Neutron::Net") == "OS::Heat::None"
    assert map_type(env, "OS::Heat::SoftwareConfig") == "OS::Heat::SoftwareConfig"


def test_map_type_prefers_the_most_specific_glob():
    """Of several matching globs, the longest wins."""
    env = Environment(resource_registry={"OS::*": "X::One", "OS::Cinder::*": "X::Two"})
    assert map_type(env, "OS::Cinder::Volume") == "X::Two"
    assert map_type(env, "OS::Nova::Flavor") == "X::One"


def test_map_type_follows_chains():
    """Mappings are followed until a type maps to nothing (or to itself)."""
    env = Environment(
        resource_registry={
            "A::A": "B::B",
            "B::B": "C::C",
            "C::*": "OS::Heat::None",
            "OS::*": "OS::Heat::None",
        }
    )
    assert map_type(env, "A::A") == "OS::Heat::None"


def test_map_type_detects_loops():
    """A mapping loop is an error showing the loop."""
    env = Environment(resource_registry={"A::A": "B::B", "B::B": "A::A"})
    with pytest.raises(TemplateError) as info:
        map_type(env, "A::A")
    assert (info.value.path, info.value.reason) == ("resource_registry", "mapping loop: A::A -> B::B -> A::A")


def test_map_type_limits_chain_length():
    """A chain longer than ten steps is an error."""
    env = Environment(resource_registry={f"T::{i}": f"T::{i + 1}" for i in range(20)})
    with pytest.raises(TemplateError, match="more than 10"):
        map_type(env, "T::0")
    assert map_type(env, "T::12") == "T::20"
