"""Boot-time configs: OS::Heat::CloudConfig and OS::Heat::MultipartMime (Heat §1.5).

Both store a software config whose ``config`` is text, so deployments,
MultipartMime parts and ``get_attr: [X, config]`` can use them.
"""

from __future__ import annotations

import email
import re
from collections.abc import Mapping
from email.message import Message
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any

import yaml

from control.hot import taint
from control.resources.base import Res
from control.resources.software import SoftwareConfig
from control.store.orm import ConfigRow
from control.txn import Txn

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class CloudConfig(SoftwareConfig):
    """``#cloud-config`` followed by the ``cloud_config`` map as YAML."""

    def group(self, props: Mapping[str, Any]) -> str:
        return "Heat::Ungrouped"

    async def body(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
        data = props.get("cloud_config") or {}
        plain = taint.reveal(data)
        text = "#cloud-config\n" + yaml.safe_dump(plain, default_flow_style=False, sort_keys=False)
        return {"config": taint.taint(text, data), "inputs": None, "outputs": None, "options": None}


class MultipartMime(SoftwareConfig):
    """One MIME multipart message of its parts: inline text or the id of another config."""

    async def body(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
        message, secret = MIMEMultipart(), False
        for part in props.get("parts") or []:
            found = await _part_text(txn, part.get("config") or "")
            secret = secret or taint.tainted(found)
            text = taint.reveal(found)
            if part.get("type") == "multipart":
                for sub in email.message_from_string(text).walk():
                    if not sub.is_multipart():
                        message.attach(sub)
                continue
            message.attach(_text_part(text, part.get("filename"), part.get("subtype")))
        config = taint.Secret(message.as_string()) if secret else message.as_string()
        return {"config": config, "inputs": None, "outputs": None, "options": None}


async def _part_text(txn: Txn, ref: Any) -> Any:
    """A part's text (a Secret when it is one): a config's ``config`` when *ref* is the id of one, else *ref*."""
    if isinstance(ref, taint.Secret):
        return taint.Secret(str(ref.value))
    ref = str(ref)
    if _UUID.match(ref):
        row = await txn.get(ConfigRow, ref)
        if row is not None:
            config = row.body.get("config")
            text = taint.reveal(config)
            return taint.taint(text if isinstance(text, str) else yaml.safe_dump(text), config)
    return ref


def _text_part(text: str, filename: Any, subtype: Any) -> Message:
    try:
        text.encode("us-ascii")
        charset = "us-ascii"
    except UnicodeEncodeError:
        charset = "utf-8"
    msg = MIMEText(text, _subtype=str(subtype or "plain"), _charset=charset)
    if filename:
        msg.add_header("Content-Disposition", "attachment", filename=str(filename))
    return msg
