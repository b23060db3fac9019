"""Credentials Heat's own agents present, minted without a Keystone: users, tokens, EC2 keys.

Heat makes a Keystone user in its stack domain for each server and for each deployment
that signals (heat.md §1.6, §2.1); its agents log in as that user (POLL_SERVER_HEAT,
HEAT_SIGNAL) or sign requests with its EC2 key (POLL_SERVER_CFN). Anneal derives each
credential from the control plane's signal key instead, so nothing is stored, and each
opens exactly one thing:

| user | password / key | may |
|---|---|---|
| ``server-<id>`` | HMAC("heat-password", user); EC2 access key ``<id>``, secret HMAC("cfn-secret", id) | read that server's metadata |
| ``deployment-<id>`` | HMAC("heat-password", user) | signal that deployment's current generation |
| ``handle-<id>`` | HMAC("heat-password", user) | signal that wait condition handle |

A token names its user and expiry and is an HMAC over both (one hour, as Keystone's).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Mapping
from urllib.parse import quote

from control.errors import AuthError
from control.keys import Keys

KINDS = ("server", "deployment", "handle")
TOKEN_TTL = 3600
#: The region the catalog names, and the documents give as ``region_name``.
REGION = "RegionOne"
#: Heat's domain for stack users; its agents send it back only as a name.
DOMAIN = {"id": "default", "name": "Default"}


def user_id(kind: str, ident: str) -> str:
    return f"{kind}-{ident}"


def parse_user(user: str) -> tuple[str, str]:
    """``(kind, id)`` of a user this control plane minted; AuthError for any other."""
    kind, sep, ident = user.partition("-")
    if not sep or kind not in KINDS or not ident:
        raise AuthError(f"unknown user {user!r}", where="auth.identity.password.user.id")
    return kind, ident


def password(keys: Keys, user: str) -> str:
    return keys.capability("heat-password", user)


def check_password(keys: Keys, user: str, given: str) -> tuple[str, str]:
    """The user's ``(kind, id)`` when *given* is its password; AuthError otherwise."""
    kind, ident = parse_user(user)
    if not keys.check_capability("heat-password", user, given):
        raise AuthError("the password does not match the user", where="auth.identity.password.user")
    return kind, ident


def issue_token(keys: Keys, user: str, now: float | None = None) -> tuple[str, int]:
    """A token for *user* and when it expires (seconds since the epoch)."""
    expires = int((time.time() if now is None else now) + TOKEN_TTL)
    body = f"{user}.{expires}"
    return f"{body}.{keys.capability('heat-token', body)}", expires


def token_user(keys: Keys, token: str | None, now: float | None = None) -> tuple[str, str]:
    """The ``(kind, id)`` a token was issued to; AuthError when it is forged or expired."""
    body, _, mac = (token or "").rpartition(".")
    user, _, expires = body.rpartition(".")
    if not user or not expires.isdigit() or not keys.check_capability("heat-token", body, mac):
        raise AuthError("X-Auth-Token is missing or not a token of this control plane", where="X-Auth-Token")
    if int(expires) < (time.time() if now is None else now):
        raise AuthError("the token has expired; log in again", where="X-Auth-Token")
    return parse_user(user)


def cfn_secret(keys: Keys, server_id: str) -> str:
    """The EC2 secret key of a server's access key (the access key id is the server id)."""
    return keys.capability("cfn-secret", server_id)


def ec2_signature(secret: str, verb: str, host: str, path: str, params: Mapping[str, str]) -> str:
    """AWS signature version 2 of a request (what os-collect-config's cfn collector sends)."""
    query = "&".join(
        f"{quote(k, safe='')}={quote(str(params[k]), safe='-_~')}" for k in sorted(params) if k != "Signature"
    )
    digest = hashlib.sha256 if params.get("SignatureMethod") == "HmacSHA256" else hashlib.sha1
    mac = hmac.new(secret.encode(), f"{verb}\n{host}\n{path}\n{query}".encode(), digest)
    return base64.b64encode(mac.digest()).decode()


def check_ec2(keys: Keys, verb: str, hosts: tuple[str, ...], path: str, params: Mapping[str, str]) -> str:
    """The server id a request signed with its EC2 key comes from; AuthError when it does not verify.

    *hosts* are the names the request may have been signed for (its Host header, the
    control plane's public URL): behind a proxy the two differ.
    """
    if params.get("SignatureVersion") != "2":
        raise AuthError("only EC2 signature version 2 is accepted", where="SignatureVersion")
    server_id, given = params.get("AWSAccessKeyId", ""), params.get("Signature", "")
    secret = cfn_secret(keys, server_id)
    for host in hosts if given.isascii() else ():  # compare_digest refuses non-ASCII text
        if hmac.compare_digest(ec2_signature(secret, verb, host, path, params), given):
            return server_id
    raise AuthError("the EC2 signature does not verify for this access key", where="Signature")


def auth_url(base: str) -> str:
    """Keystone v3 as Heat's agents reach it here."""
    return f"{base}/v1/heat/keystone/v3"


def orchestration_url(base: str, project: str) -> str:
    """Heat's API (``orchestration`` in the catalog) for *project*."""
    return f"{base}/v1/heat/orchestration/v1/{project}"


def cfn_url(base: str) -> str:
    """heat-api-cfn's root, where the cfn collector asks DescribeStackResource."""
    return f"{base}/v1/heat/cfn/v1/"
