"""Both servers that mount the reviewer surface serve passkeys for a step-up template: ``serve``
(see ``test_passkey_docs.py``) and the reference ``arap-server``, whose store gains the passkey
tables only then and whose OpenAPI document describes the routes it serves."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect
from starlette.testclient import TestClient

from mcp_approval.reference.config import load_arap_config
from mcp_approval.reference.server import build_arap_server
from tests.fuzz.test_openapi import described, published, served
from tests.support.arap import arap_deployment


def _tables(path: Path) -> set[str]:
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_the_arap_server_serves_passkeys_for_a_step_up_template(tmp_path: Path) -> None:
    step_up = {"templates": {"treasury": {"step_up": "passkey"}}}
    deployment = arap_deployment(tmp_path, ars_overrides=step_up)
    config = load_arap_config(deployment.directory / "arap-server.toml")
    store = tmp_path / "ars.db"
    server = build_arap_server(config, store_url=f"sqlite:///{store}", base_url=deployment.ars.base_url)
    assert server.passkeys is not None
    assert described(published(server.app)) == served(server.app)
    assert ("/approvals/{request_id}/passkey/decide", "post") in served(server.app)
    with TestClient(server.app) as client:  # its lifespan migrates the store
        assert client.get("/console/static/passkey.js").status_code == 200
    assert {"reviewer_passkeys", "passkey_challenges"} <= _tables(store)


def test_without_a_step_up_template_the_arap_server_has_no_passkey_tables(tmp_path: Path) -> None:
    deployment = arap_deployment(tmp_path)
    config = load_arap_config(deployment.directory / "arap-server.toml")
    store = tmp_path / "ars.db"
    server = build_arap_server(config, store_url=f"sqlite:///{store}", base_url=deployment.ars.base_url)
    assert server.passkeys is None
    with TestClient(server.app):
        pass
    assert "reviewer_passkeys" not in _tables(store)
    assert ("/approvals/{request_id}/passkey/decide", "post") not in served(server.app)
