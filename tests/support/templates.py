"""HOT templates the tests build again and again: one script on one server, on many, or as a group.

The builders write the house's HOT style (flow maps for short lines); what a test varies is
a keyword: the script, the parameters, the inputs, the server, its transport.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _flow(items: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in items.items()) + "}"


def _block(script: str, indent: int) -> list[str]:
    """*script* as the lines of a `|` block scalar (one final newline, as YAML keeps it)."""
    lines = textwrap.dedent(script.strip("\n")).splitlines()
    return [" " * indent + line if line else "" for line in lines]


def _parameters(params: Mapping[str, str]) -> list[str]:
    """`parameters:` with *params* name -> the rest of its declaration after `type: `."""
    return (
        ["parameters:", *(f"  {name}: {{type: {decl}}}" for name, decl in params.items())] if params else []
    )


def _config(script: str, inputs: Sequence[str], outputs: Sequence[str], options: str | None) -> list[str]:
    names = ", ".join(f"{{name: {n}}}" for n in inputs)
    declared = ", ".join(f"{{name: {n}}}" for n in outputs)
    return [
        "  cfg:",
        "    type: OS::Heat::SoftwareConfig",
        "    properties:",
        "      group: script",
        *([f"      options: {options}"] if options else []),
        *([f"      inputs: [{names}]"] if inputs else []),
        *([f"      outputs: [{declared}]"] if outputs else []),
        "      config: |",
        *_block(script, 8),
    ]


def _outputs(outputs: Mapping[str, str]) -> list[str]:
    return ["outputs:", *(f"  {k}: {{value: {v}}}" for k, v in outputs.items())] if outputs else []


def deployed_server(resource: str, **properties: str) -> str:
    """One `OS::Heat::DeployedServer` line under `resources:` (properties such as name, software_config_transport)."""
    props = f", properties: {_flow(properties)}" if properties else ""
    return f"  {resource}: {{type: OS::Heat::DeployedServer{props}}}"


def one_script_deployment(
    script: str,
    *,
    version: str = "rocky",
    params: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | None = None,
    outputs: Sequence[str] = (),
    stack_outputs: Mapping[str, str] | None = None,
    server: str | None = None,
    box: str = "box",
    server_name: str | None = None,
    transport: str | None = None,
    signal_transport: str | None = None,
    actions: str | None = None,
    options: str | None = None,
    timeout: float | None = None,
) -> str:
    """A stack of one script config and one deployment `dep` of it (its `timeout`: *timeout*), on one server.

    *inputs* maps each config input to its value in the deployment (`{get_param: dir}`);
    *outputs* are declared on the config and, unless *stack_outputs* says otherwise, each is
    a stack output of the same name. *server* names an existing server; without it the stack
    has a DeployedServer resource *box* (with *server_name* and *transport*, its
    software_config_transport).
    """
    inputs = inputs or {}
    if server is None:
        props = {"name": server_name, "software_config_transport": transport}
        servers = [deployed_server(box, **{k: v for k, v in props.items() if v})]
        target = f"{{get_resource: {box}}}"
    else:
        servers, target = [], server
    if stack_outputs is None:
        stack_outputs = {name: f"{{get_attr: [dep, {name}]}}" for name in outputs}
    lines = [
        f"heat_template_version: {version}",
        *_parameters(params or {}),
        "resources:",
        *servers,
        *_config(script, list(inputs), outputs, options),
        "  dep:",
        "    type: OS::Heat::SoftwareDeployment",
        "    properties:",
        "      config: {get_resource: cfg}",
        f"      server: {target}",
        *([f"      actions: [{actions}]"] if actions else []),
        *([f"      timeout: {timeout:g}"] if timeout is not None else []),
        *([f"      signal_transport: {signal_transport}"] if signal_transport else []),
        *([f"      input_values: {_flow(inputs)}"] if inputs else []),
        *_outputs(stack_outputs),
    ]
    return "\n".join(lines) + "\n"


def said_stack(transport: str, *, server_name: str | None = None, before: str = "") -> str:
    """The stack the transport tests move around: its output `said` is `said <message>` (default `one`).

    *before* is a shell command the script runs first (e.g. a sleep that keeps the hook busy).
    """
    return one_script_deployment(
        f'#!/bin/sh\n{before}printf \'said %s\' "$MESSAGE" > "$heat_outputs_path.said"\n',
        params={"message": "string, default: one"},
        inputs={"MESSAGE": "{get_param: message}"},
        outputs=["said"],
        server_name=server_name,
        transport=transport,
    )


def script_per_server(
    script: str,
    servers: Sequence[str],
    *,
    inputs: Sequence[Mapping[str, str]],
    output: str,
    params: Mapping[str, str] | None = None,
    transport: str | None = None,
) -> str:
    """One script config, a deployment `dep<i>` of it on each server and a stack output `out<i>` of its *output*.

    *servers* are existing server names, or with *transport* the names of DeployedServer
    resources on that transport; *inputs[i]* are the input values of deployment i.
    """
    resources = []
    for i, (name, values) in enumerate(zip(servers, inputs, strict=True)):
        if transport:
            resources.append(deployed_server(name, software_config_transport=transport))
        target = f"{{get_resource: {name}}}" if transport else name
        resources += [
            f"  dep{i}:",
            "    type: OS::Heat::SoftwareDeployment",
            "    properties:",
            "      config: {get_resource: cfg}",
            f"      server: {target}",
            f"      input_values: {_flow(values)}",
        ]
    lines = [
        "heat_template_version: rocky",
        *_parameters(params or {}),
        "resources:",
        *_config(script, list(inputs[0]) if inputs else [], [output], None),
        *resources,
        *_outputs({f"out{i}": f"{{get_attr: [dep{i}, {output}]}}" for i in range(len(servers))}),
    ]
    return "\n".join(lines) + "\n"


def script_group(
    script: str,
    *,
    params: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | None = None,
    outputs: Sequence[str] = (),
    actions: str | None = None,
    name: str | None = None,
    update_policy: str | None = None,
) -> str:
    """Two servers `sa` and `sb`, and a SoftwareDeploymentGroup `group` of one script config on them (members a, b).

    *inputs* are the group's input values; each of *outputs* is declared on the config and
    is a stack output of the group's attribute of that name; *update_policy* is a flow map.
    """
    inputs = inputs or {}
    lines = [
        "heat_template_version: 2018-08-31",
        *_parameters(params or {}),
        "resources:",
        deployed_server("sa"),
        deployed_server("sb"),
        *_config(script, list(inputs), outputs, None),
        "  group:",
        "    type: OS::Heat::SoftwareDeploymentGroup",
        *([f"    update_policy: {update_policy}"] if update_policy else []),
        "    properties:",
        "      config: {get_resource: cfg}",
        *([f"      name: {name}"] if name else []),
        *([f"      actions: [{actions}]"] if actions else []),
        "      servers: {a: {get_resource: sa}, b: {get_resource: sb}}",
        *([f"      input_values: {_flow(inputs)}"] if inputs else []),
        *_outputs({o: f"{{get_attr: [group, {o}]}}" for o in outputs}),
    ]
    return "\n".join(lines) + "\n"


def round_on_stores(names: Sequence[str] = (), *, clock: bool = False) -> str:
    """A hook on a SWIFT and on an S3 server says `round <round>`: stack outputs `sw` and `s3`.

    *names* are the two servers' names (enrolled by the test); without them the stack has two
    DeployedServer resources `sw` and `s3` on those transports. With *clock* the hook also
    reports its own clock (`date +%s`), the stack output `clock` (the SWIFT one's).
    """
    said = 'printf \'round %s\' "$ROUND" > "$heat_outputs_path.said"'
    script = f"#!/bin/sh\n{said}\n" + ('date +%s > "$heat_outputs_path.clock"\n' if clock else "")
    outputs = ["said", "clock"] if clock else ["said"]
    sw, s3 = names or ("{get_resource: sw}", "{get_resource: s3}")
    servers = (
        []
        if names
        else [
            deployed_server("sw", software_config_transport="SWIFT"),
            deployed_server("s3", software_config_transport="S3"),
        ]
    )
    deployments = [
        f"  d{key}:\n    type: OS::Heat::SoftwareDeployment\n    properties: "
        + _flow(
            {"config": "{get_resource: cfg}", "server": server, "input_values": "{ROUND: {get_param: round}}"}
        )
        for key, server in (("sw", sw), ("s3", s3))
    ]
    stack_outputs = {"sw": "{get_attr: [dsw, said]}", "s3": "{get_attr: [ds3, said]}"}
    lines = [
        "heat_template_version: rocky",
        *_parameters({"round": "string"}),
        "resources:",
        *_config(script, ["ROUND"], outputs, None),
        *servers,
        *deployments,
        *_outputs(stack_outputs | ({"clock": "{get_attr: [dsw, clock]}"} if clock else {})),
    ]
    return "\n".join(lines) + "\n"


GATED = """
#!/bin/sh
i=0
while [ ! -e "$GO" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
printf 'round %s' "$ROUND" > "$heat_outputs_path.said"
"""


def gated_per_server(names: Sequence[str], go: Path, round_: int) -> str:
    """On each named server a hook waits (60 s at most) for the file *go*, then says `round <round_>`."""
    values = {"GO": f'"{go}"', "ROUND": f'"{round_}"'}
    return script_per_server(GATED, names, inputs=[values] * len(names), output="said")


def software_deployment(
    name: str,
    inputs: str,
    *,
    actions: str | None = None,
    config: str = "cfg",
    server: str = "srv",
    depends_on: str | None = None,
    extra: str = "",
) -> str:
    """The HOT text of one `OS::Heat::SoftwareDeployment` under `resources:`.

    *inputs* is the flow map inside `input_values: {...}`; *actions* the list inside
    `actions: [...]` (None: Heat's default); *extra* more property lines, indented.
    """
    lines = [
        f"  {name}:",
        "    type: OS::Heat::SoftwareDeployment",
        *([f"    depends_on: {depends_on}"] if depends_on else []),
        "    properties:",
        f"      config: {{get_resource: {config}}}",
        f"      server: {{get_resource: {server}}}",
        *([f"      actions: [{actions}]"] if actions is not None else []),
        f"      input_values: {{{inputs}}}",
    ]
    return "\n".join(lines) + "\n" + extra


#: A member of NESTED_GROUP: its own server and one deployment, which logs "<index>-<action>-<rev>" to LOG.
NESTED_MEMBER = """
heat_template_version: 2018-08-31
parameters:
  index: {type: string}
  log: {type: string}
  rev: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: {list_join: ['-', [nest, {get_param: index}]]}}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: REV}, {name: LOG}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "$WHO-$deploy_action-$REV" >> "$LOG"
        printf '%s-%s' "$WHO" "$REV" > "$heat_outputs_path.said"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE]
      input_values: {WHO: {get_param: index}, REV: {get_param: rev}, LOG: {get_param: log}}
outputs:
  said: {value: {get_attr: [dep, said]}}
"""

#: A ResourceGroup of two NESTED_MEMBERs (`member.yaml` in the files): two levels of nested stacks.
NESTED_GROUP = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  rev: {type: string, default: r1}
resources:
  fleet:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: member.yaml
        properties: {index: '%index%', log: {get_param: log}, rev: {get_param: rev}}
outputs:
  said: {value: {get_attr: [fleet, said]}}
"""


def done_at_once_member(server_name: str | None = None) -> dict[str, Any]:
    """A nested member (`member.yaml`): a server, its config and a deployment that needs no signal,
    all done in the step that starts them."""
    server: dict[str, Any] = {"type": "OS::Heat::DeployedServer"}
    if server_name is not None:
        server["properties"] = {"name": server_name}
    deployment = {
        "config": {"get_resource": "cfg"},
        "server": {"get_resource": "srv"},
        "signal_transport": "NO_SIGNAL",
    }
    return {
        "heat_template_version": "2018-08-31",
        "resources": {
            "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "true"}},
            "srv": server,
            "dep": {"type": "OS::Heat::SoftwareDeployment", "properties": deployment},
        },
    }


def group_of_members(count: int) -> dict[str, Any]:
    """A ResourceGroup of *count* `member.yaml` nested stacks."""
    group = {"count": count, "resource_def": {"type": "member.yaml"}}
    return {
        "heat_template_version": "2018-08-31",
        "resources": {"fleet": {"type": "OS::Heat::ResourceGroup", "properties": group}},
    }
