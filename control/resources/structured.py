"""OS::Heat::StructuredConfig and OS::Heat::StructuredDeployment (Heat §1.3).

The config is a map; the deployment replaces every ``{input_key: NAME}`` in it by
the value of input NAME when it derives the config (deploy.substitute_inputs).
"""

from __future__ import annotations

from control.resources.software import SoftwareConfig, SoftwareDeployment


class StructuredConfig(SoftwareConfig):
    """A SoftwareConfig whose ``config`` is a map, delivered to the hook as JSON."""


class StructuredDeployment(SoftwareDeployment):
    """``{get_input: NAME}`` (or the ``input_key`` given) in the config becomes NAME's value."""

    structured = True
