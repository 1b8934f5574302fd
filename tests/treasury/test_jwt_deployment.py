"""A production-mode ``serve`` (no dev mode, no static tokens) authenticating with JWT access tokens.

Callers, reviewers and the console present RFC 9068 access tokens signed by a test authorization
server key; ``[auth]`` names the issuer, the audience and the key set (a file here). Roles for
reviewer templates come from ``[[principals]]`` entries without tokens. Everything runs against a
real ``serve`` subprocess over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from mcp_approval.checks.wire import Wire
from mcp_approval.config import ConfigError, load_config
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, to_toml
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

ISSUER = "https://login.treasury.test"
KID = "treasury-as-1"


class Issuer:
    """The test authorization server's signing key: mints access tokens for the deployment."""

    def __init__(self, audience: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.audience = audience

    def jwks(self) -> dict[str, Any]:
        public = json.loads(ECAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": KID, "use": "sig", "alg": "ES256"}]}

    def token(self, subject: str, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": self.audience, "sub": subject, "iat": now, "exp": now + 600, **claims}
        return jwt.encode(body, self.key, algorithm="ES256", headers={"typ": "at+jwt", "kid": KID})


def production_config(directory: Path, audience: str) -> None:
    """Turn the example's dev deployment into a production one that trusts the test issuer."""
    config = tomllib.loads((directory / "config.toml").read_text())
    config["server"]["dev_mode"] = False
    config["principals"] = [{"id": entry["id"], "roles": entry["roles"]} for entry in config["principals"]]
    config["auth"] = {"issuer": ISSUER, "audience": audience, "jwks_file": "jwks.json"}
    (directory / "config.toml").write_text(to_toml(config))


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[tuple[TreasuryServer, Issuer]]:
    directory = deployment_dir(tmp_path)
    server = TreasuryServer(directory)
    issuer = Issuer(f"{server.base_url}/mcp")
    (directory / "jwks.json").write_text(json.dumps(issuer.jwks()))
    production_config(directory, issuer.audience)
    server.start()
    try:
        yield server, issuer
    finally:
        server.kill()


async def test_an_approval_flow_runs_on_jwt_access_tokens_alone(deployment):
    server, issuer = deployment
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(30)) as http:
        alice = Wire(http, token=issuer.token("alice"))
        small = (await alice.call_tool("wire_transfer", {"to": "acct-jwt-1", "amount": 10})).result
        assert small["isError"] is False, small
        created = (await alice.call_tool("wire_transfer", {"to": "acct-jwt-2", "amount": 30_000})).result
        assert created["status"] == "working"
        carol = Reviewer(http, issuer.token("carol"))
        approval = await approval_for(carol, "wire_transfer", to="acct-jwt-2")
        # The requester holds no approver role: the same API refuses her decision.
        refused = await Reviewer(http, issuer.token("alice")).decide(approval["id"], "approve")
        assert refused.status_code == 403, refused.text
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        assert_approved_executed(await settled(alice, created["taskId"]))
    assert [entry["to"] for entry in server.ledger()] == ["acct-jwt-1", "acct-jwt-2"]


async def test_tasks_belong_to_the_token_subject(deployment):
    server, issuer = deployment
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(30)) as http:
        alice = Wire(http, token=issuer.token("alice"))
        created = (await alice.call_tool("wire_transfer", {"to": "acct-jwt-3", "amount": 30_000})).result
        stranger = Wire(http, token=issuer.token("bob"))
        assert (await stranger.get(created["taskId"])).error["code"] == -32602
        assert (await alice.get(created["taskId"])).result["status"] == "working"


@pytest.mark.parametrize(
    "case", ["no token", "another audience", "another issuer", "expired", "a static dev token", "another key"]
)
async def test_tokens_the_deployment_does_not_trust_get_401_with_the_resource_metadata(deployment, case):
    server, issuer = deployment
    now = int(time.time())
    presented = {
        "no token": None,
        "another audience": issuer.token("alice", aud="https://elsewhere.test/mcp"),
        "another issuer": issuer.token("alice", iss="https://evil.test"),
        "expired": issuer.token("alice", iat=now - 900, exp=now - 300),
        "a static dev token": "alice-token",
        "another key": Issuer(issuer.audience).token("alice"),
    }[case]
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(30)) as http:
        headers = {"accept": "application/json, text/event-stream"}
        if presented is not None:
            headers["authorization"] = f"Bearer {presented}"
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        reply = await http.post("/mcp", json=request, headers=headers)
        assert reply.status_code == 401
        challenge = reply.headers.get("www-authenticate", "")
        assert challenge.startswith("Bearer")
        assert "resource_metadata=" in challenge
        metadata = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        credentials = {"authorization": headers["authorization"]} if presented is not None else {}
        reviewers = await http.get("/approvals", headers=credentials)
    assert metadata["resource"] == issuer.audience
    assert metadata["authorization_servers"] == [ISSUER]
    assert reviewers.status_code == 401


def test_static_tokens_outside_dev_mode_are_refused_naming_the_field(tmp_path):
    directory = deployment_dir(tmp_path)
    config = tomllib.loads((directory / "config.toml").read_text())
    config["server"]["dev_mode"] = False
    (directory / "config.toml").write_text(to_toml(config))
    with pytest.raises(ConfigError, match=r"principals: .*token.* only with server\.dev_mode"):
        load_config(directory / "config.toml")


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ({"issuer": ISSUER, "audience": "https://mcp.test/mcp"}, "exactly one of jwks_url and jwks_file"),
        (
            {"issuer": ISSUER, "audience": "https://mcp.test/mcp", "jwks_url": "http://keys.example.test/jwks"},
            "auth.jwks_url: .*https",
        ),
        (
            {"issuer": ISSUER, "audience": "https://mcp.test/mcp", "jwks_file": "k.json", "algorithms": ["HS256"]},
            "auth.algorithms",
        ),
    ],
)
def test_an_unusable_auth_section_is_refused_naming_the_field(tmp_path, auth, message):
    directory = deployment_dir(tmp_path)
    config = tomllib.loads((directory / "config.toml").read_text())
    config["auth"] = auth
    (directory / "config.toml").write_text(to_toml(config))
    with pytest.raises(ConfigError, match=message):
        load_config(directory / "config.toml")
