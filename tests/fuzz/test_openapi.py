"""The OpenAPI documents the servers publish describe exactly the routes they serve.

``serve`` (the treasury example, with callbacks and metrics on) and ``arap-server`` are built
in-process from their files; every route but MCP's (``/mcp`` and its protected resource
metadata) and ``/openapi.json`` itself must be in the document with the same methods, and the
document must describe no other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from mcp_approval.config import load_config
from mcp_approval.openapi import OPENAPI_PATH, openapi_document
from mcp_approval.reference.config import load_arap_config
from mcp_approval.reference.server import build_arap_server
from mcp_approval.server.deployment import build_deployment, deployment_app
from tests.support.arap import arap_deployment
from tests.support.treasury import deployment_dir

#: MCP itself (JSON-RPC, and the SDK's RFC 9728 metadata of it) and the document.
NOT_DESCRIBED = {"/mcp", "/.well-known/oauth-protected-resource/mcp", OPENAPI_PATH}
METRICS = {"metrics": {"enabled": True, "bearer_token": "metrics-token"}}
CALLBACKS = {"approval": {"callback_secret": "s" * 32}}


def served(app: Starlette) -> set[tuple[str, str]]:
    """(path, method) of every route of ``app`` the document must describe (HEAD comes with GET)."""
    pairs = set()
    for route in app.routes:
        path = getattr(route, "path", None)
        if path is None or path.rstrip("/") in NOT_DESCRIBED:
            continue
        methods = route.methods if isinstance(route, Route) and route.methods else {"GET"}
        pairs |= {(path, method.lower()) for method in methods if method != "HEAD"}
    return pairs


def described(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(path, method) for path, item in document["paths"].items() for method in item}


def published(app: Starlette) -> dict[str, Any]:
    """The document ``app`` serves (asked without its lifespan: the route needs no store)."""
    response = TestClient(app).get(OPENAPI_PATH)
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def test_serve_publishes_its_routes(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {**METRICS, **CALLBACKS})
    deployment = build_deployment(load_config(directory / "config.toml"), base_url="http://127.0.0.1:1")
    app = deployment_app(deployment)
    document = published(app)
    assert document["openapi"].startswith("3.1")
    assert described(document) == served(app)
    assert ("/approvals/{request_id}/decide", "post") in served(app)  # the reviewer API is among them


def test_arap_server_publishes_its_routes(tmp_path: Path) -> None:
    deployment = arap_deployment(tmp_path)
    config = load_arap_config(deployment.directory / "arap-server.toml")
    server = build_arap_server(config, base_url=deployment.ars.base_url)
    document = published(server.app)
    assert described(document) == served(server.app)
    assert ("/access/v1/evaluation", "post") in served(server.app)


def test_a_path_described_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="described twice"):
        openapi_document("x", "1", {"/a": {}}, {"/a": {}})
