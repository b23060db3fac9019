"""OS::Heat::Stack: a nested stack of the template its ``template`` property holds; and
AWS::CloudFormation::Stack, of the file its ``TemplateURL`` names (control/hot/heatstack.py).

It is a template resource (control/resources/provider.py) whose template comes from the
property instead of the files, whose parameters are ``parameters``, and whose ``timeout``
(minutes) is the nested stack's timeout_mins (else its parent's): the default timeout of its
deployments, and the time its create or update may take before it fails as "Timed out".
The CloudFormation one's are ``Parameters`` and ``TimeoutInMinutes``; its attributes are
``Outputs.NAME``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control import hot
from control.hot.files import CFN_STACK
from control.hot.heatstack import REMOTE, cfn_template, source_of
from control.resources import deploy, nested
from control.resources.base import Res
from control.resources.provider import HIDDEN, TemplateResource
from control.store.orm import StackRow
from control.txn import Txn

HEAT_STACK = "OS::Heat::Stack"


class HeatStack(TemplateResource):
    """A nested stack given by its properties; ``outputs`` and ``stack_name`` are its attributes."""

    #: Its properties: the template, the parameters, the timeout (minutes).
    keys = ("template", "parameters", "timeout")

    def template(self, props: Mapping[str, Any], files: Mapping[str, str], where: str) -> Any:
        """The ``template`` property: text, or a ``get_file`` of it."""
        return props.get("template")

    def parts(self, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
        assert res.nest is not None, "a stack resource acts with its Nest"
        where = f"{res.where}.properties"
        context = props.get("context") or {}
        if isinstance(context, Mapping) and context.get("region_name") is not None:
            raise hot.TemplateError(f"{where}.context.region_name", f"{context['region_name']!r}: {REMOTE}")
        files = dict(res.stack.files or {})
        template_key, params_key, _ = self.keys
        at = f"{where}.{template_key}"
        found = source_of(self.template(props, files, at), files, at)
        if found is None:
            raise hot.TemplateError(at, "expected the template's text")
        params = props.get(params_key) or {}
        if not isinstance(params, Mapping):
            raise hot.TemplateError(f"{where}.{params_key}", "expected a map of parameter values")
        return {
            "template": hot.plain(found[1]),
            "files": files,
            "environment": hot.child_environment(res.nest.environment, res.name),
            "params": {k: v for k, v in params.items() if v is not None},
        }

    def started(self, txn: Txn, child: StackRow, props: Mapping[str, Any]) -> None:
        timeout = props.get(self.keys[2])
        if timeout is not None:  # else the parent's, as Heat's nested stacks inherit it
            child.timeout_mins = int(timeout)
            deploy.start_deadline(txn.runtime.settings, child)

    def attributes(self, child: nested.ChildState, outputs: Mapping[str, Any]) -> dict[str, Any]:
        shown = {k: v for k, v in outputs.items() if not k.startswith(HIDDEN)}
        return {"outputs": shown, "stack_name": child.name, hot.STACK_ID: child.id}


class CfnStack(HeatStack):
    """AWS::CloudFormation::Stack: the template is the file TemplateURL names; ``Outputs.NAME``."""

    keys = ("TemplateURL", "Parameters", "TimeoutInMinutes")

    def template(self, props: Mapping[str, Any], files: Mapping[str, str], where: str) -> Any:
        return cfn_template(props.get("TemplateURL"), files, where)

    def attributes(self, child: nested.ChildState, outputs: Mapping[str, Any]) -> dict[str, Any]:
        shown = {f"Outputs.{k}": v for k, v in outputs.items() if not k.startswith(HIDDEN)}
        return {**shown, hot.STACK_ID: child.id}


__all__ = ["CFN_STACK", "HEAT_STACK", "CfnStack", "HeatStack"]
