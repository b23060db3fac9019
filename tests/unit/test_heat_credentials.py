"""The credentials minted for Heat's agents, and wait condition signal bodies, open only what they are for."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control.documents import heatauth
from control.errors import AuthError, BadRequestError
from control.keys import Keys
from control.signals.waits import parse_signal

KEYS = Keys("admin", Ed25519PrivateKey.generate(), b"k" * 32)
OTHER = Keys("admin", Ed25519PrivateKey.generate(), b"o" * 32)


def test_a_password_logs_in_its_own_user_only() -> None:
    """A user's password is its own; another user's, another control plane's or a made-up user is refused."""
    user = heatauth.user_id("deployment", "d1")
    assert heatauth.check_password(KEYS, user, heatauth.password(KEYS, user)) == ("deployment", "d1")
    with pytest.raises(AuthError):
        heatauth.check_password(KEYS, user, heatauth.password(KEYS, "deployment-d2"))
    with pytest.raises(AuthError):
        heatauth.check_password(KEYS, user, heatauth.password(OTHER, user))
    with pytest.raises(AuthError):
        heatauth.check_password(KEYS, "admin", heatauth.password(KEYS, "admin"))


def test_a_token_names_its_user_until_it_expires_and_cannot_be_altered() -> None:
    """token_user gives the user back; a changed user, expiry or mac, or a later time, is refused."""
    token, expires = heatauth.issue_token(KEYS, "server-s1", now=1000.0)
    assert expires == 1000 + heatauth.TOKEN_TTL
    assert heatauth.token_user(KEYS, token, now=1001.0) == ("server", "s1")
    user, exp, mac = token.rsplit(".", 2)
    for forged in (f"server-s2.{exp}.{mac}", f"{user}.{int(exp) + 10}.{mac}", f"{user}.{exp}.{'0' * 64}", ""):
        with pytest.raises(AuthError):
            heatauth.token_user(KEYS, forged, now=1001.0)
    with pytest.raises(AuthError, match="expired"):
        heatauth.token_user(KEYS, token, now=expires + 1.0)


def test_ec2_signature_verifies_for_the_signing_host_and_key_only() -> None:
    """A request signed with the server's secret names the server; another host or key does not verify."""
    params = {
        "Action": "DescribeStackResource",
        "StackName": "web",
        "LogicalResourceId": "box",
        "AWSAccessKeyId": "s1",
        "SignatureVersion": "2",
        "SignatureMethod": "HmacSHA256",
    }
    secret = heatauth.cfn_secret(KEYS, "s1")
    params["Signature"] = heatauth.ec2_signature(secret, "GET", "cp:8770", "/v1/heat/cfn/v1/", params)
    assert heatauth.check_ec2(KEYS, "GET", ("x", "cp:8770"), "/v1/heat/cfn/v1/", params) == "s1"
    with pytest.raises(AuthError):
        heatauth.check_ec2(KEYS, "GET", ("other:8770",), "/v1/heat/cfn/v1/", params)
    with pytest.raises(AuthError):
        heatauth.check_ec2(OTHER, "GET", ("cp:8770",), "/v1/heat/cfn/v1/", params)
    with pytest.raises(AuthError):
        heatauth.check_ec2(KEYS, "GET", ("cp:8770",), "/v1/heat/cfn/v1/", {**params, "AWSAccessKeyId": "s2"})


def test_wait_signal_bodies_take_heats_defaults_and_refuse_the_rest() -> None:
    """An OS handle's signal defaults as Heat's; AWS needs all four keys; unknown keys and statuses are 400."""
    assert parse_signal({}, aws=False, received=2) == (
        "3",
        {"status": "SUCCESS", "reason": "Signal 3 received", "data": None},
    )
    assert parse_signal({"status": "FAILURE", "reason": "r", "id": "a", "data": 1}, False, 0) == (
        "a",
        {"status": "FAILURE", "reason": "r", "data": 1},
    )
    aws = {"Status": "SUCCESS", "Reason": "up", "UniqueId": "w", "Data": "42"}
    assert parse_signal(aws, aws=True, received=0) == (
        "w",
        {"status": "SUCCESS", "reason": "up", "data": "42"},
    )
    cases = [
        ({"status": "DONE"}, False, "status"),
        ({"colour": "red"}, False, "colour"),
        ({"Status": "SUCCESS"}, True, "Data"),
        (["SUCCESS"], False, "body"),
    ]
    for body, is_aws, where in cases:
        with pytest.raises(BadRequestError) as err:
            parse_signal(body, is_aws, 0)
        assert err.value.where == where
