"""/openapi.json describes every route, and every route that is not public needs a credential."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from openapi_spec_validator import OpenAPIV31SpecValidator

from control.api import routes
from control.api.openapi import spec
from control.errors import ControlError
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
ROUTES = sorted(
    (r.method, r.path, getattr(r.handler, "anneal_auth", None))
    for r in routes.ROUTES
    if isinstance(r, web.RouteDef)
)
PROTECTED = [(method, path) for method, path, policy in ROUTES if policy != "public"]


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("openapi"), "--provisioner", "enrol")
    yield plane
    stop_control_plane(plane)


@pytest.fixture(scope="module")
def served(cp: ControlPlane) -> dict[str, Any]:
    resp = cp.api("GET", "/openapi.json", token=None)
    assert 200 == resp.status
    return dict(resp.body)


def test_served_spec_is_valid_openapi_3_1(served: dict[str, Any]) -> None:
    """/openapi.json, fetched without a credential, passes the OpenAPI 3.1 validator."""
    assert served["openapi"].startswith("3.1.")
    assert list(OpenAPIV31SpecValidator(served).iter_errors()) == []


def test_every_operation_has_a_summary_and_responses(served: dict[str, Any]) -> None:
    """Each operation names what it does and its responses, with at least one 2xx or 304."""
    operations = [
        (path, m, op) for path, item in served["paths"].items() for m, op in item.items() if m in HTTP_METHODS
    ]
    assert len(operations) >= len(ROUTES)
    for path, method, op in operations:
        assert op.get("summary"), (method, path)
        codes = set(op["responses"])
        assert any(c.startswith("2") or c == "304" for c in codes), (method, path, codes)
        for code, response in op["responses"].items():
            assert response.get("description"), (method, path, code)


def test_every_registered_route_is_in_the_spec_with_its_method(served: dict[str, Any]) -> None:
    """Each route of control.api.routes.ROUTES appears in the spec under the same path and method."""
    missing = [(m, p) for m, p, _ in ROUTES if m.lower() not in served["paths"].get(p, {})]
    assert [] == missing


def test_every_spec_operation_is_a_registered_route(served: dict[str, Any]) -> None:
    """The spec documents no operation the control plane does not serve."""
    registered = {(m.lower(), p) for m, p, _ in ROUTES}
    documented = {(m, p) for p, item in served["paths"].items() for m in item if m in HTTP_METHODS}
    assert set() == documented - registered


def test_spec_security_matches_each_routes_policy(served: dict[str, Any]) -> None:
    """Public routes have no security requirement; the others name their policy's scheme."""
    schemes = served["components"]["securitySchemes"]
    for method, path, policy in ROUTES:
        security = served["paths"][path][method.lower()]["security"]
        if policy == "public":
            assert [] == security, path
        else:
            assert [{policy: []}] == security, (method, path)
            assert policy in schemes


def test_every_route_declares_an_access_policy():
    """Every handler carries anneal_auth (public, read, write, admin, metrics, agent or signal): nothing relies on defaults."""
    allowed = ("public", "read", "write", "admin", "metrics", "agent", "signal")
    assert [] == [(m, p) for m, p, policy in ROUTES if policy not in allowed]


def _error_classes(base: type[ControlError]) -> list[type[ControlError]]:
    return [base, *(c for sub in base.__subclasses__() for c in _error_classes(sub))]


def test_error_schema_names_every_error_code(served: dict[str, Any]) -> None:
    """The Error body's code field lists each ControlError code and the middleware's own ones."""
    described = served["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]
    codes = {c.code for c in _error_classes(ControlError)} | {"invalid_template", "unavailable", "http"}
    assert [] == sorted(c for c in codes if c not in described["description"])


def _concrete(path: str) -> str:
    """A request path for a route: each {placeholder} replaced by a plausible value."""
    values = {"generation": "1"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "no-such-" + m.group(1)), path)


@pytest.mark.parametrize(("method", "path"), PROTECTED, ids=[f"{m} {p}" for m, p in PROTECTED])
def test_protected_route_answers_401_without_a_token(cp: ControlPlane, method: str, path: str) -> None:
    """Default deny: a route not marked public answers 401 with a JSON error when no token is sent."""
    body = {"deploy_status_code": 0} if method in ("POST", "PUT") else None
    resp = cp.api(method, _concrete(path), body, token=None)
    assert 401 == resp.status, (resp.status, resp.body)
    assert "unauthorized" == resp.body["error"]["code"]


def test_admin_routes_refuse_a_wrong_token(cp: ControlPlane) -> None:
    """A wrong bearer token on an admin route is 401, the right one is 200."""
    assert 401 == cp.api("GET", "/v1/stacks", token="not-the-admin-token").status
    assert 200 == cp.api("GET", "/v1/stacks").status


def test_served_spec_is_control_openapi_spec(served: dict[str, Any]) -> None:
    """What the server answers is control.api.openapi.spec(), the document these tests introspect."""
    assert spec() == served
