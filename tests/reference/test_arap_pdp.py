"""The reference PDP of arap-server over HTTP: metadata, JWKS, requestable denials, re-evaluation.

The server runs in this process (uvicorn in a thread) on a ManualClock; requests are real HTTP.
Tokens are checked with PyJWT against the JWK Set fetched from ``jwks_uri``, as an independent ARS would.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from mcp_approval.clock import ManualClock, SystemClock, parse_iso8601
from mcp_approval.reference.binding import binding_hash
from mcp_approval.reference.signing import KeySet, SigningKey
from tests.reference.arap_support import Harness, arap_dir, running_arap, submission, tool_call, transfer

CLOCK = ManualClock(start_ms=SystemClock().now_ms())


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    directory = arap_dir(tmp_path_factory.mktemp("pdp"))
    with running_arap(directory, clock=CLOCK) as harness:
        yield harness


def approved(h: Harness, request: dict[str, Any], key: str) -> dict[str, Any]:
    """An approval the ARS issued for ``request`` (approved by carol through the reviewer API)."""
    _, response = h.request_for(request, key=key)
    assert response.status_code == 202, response.text
    for request_id in h.pending_ids():
        h.decide(request_id, "carol")
    status = h.status(response.headers["location"]).json()
    assert status["task"]["status"] == "approved", status
    return dict(status["result"]["approval"])


def with_approval(request: dict[str, Any], approval: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(request)
    body["context"]["approval"] = approval
    return body


def test_metadata_names_every_arap_endpoint(h: Harness):
    document = h.http.get("/.well-known/authzen-configuration").json()
    base = h.base_url
    assert document == {
        "policy_decision_point": base,
        "access_evaluation_endpoint": base + "/access/v1/evaluation",
        "access_evaluations_endpoint": base + "/access/v1/evaluations",
        "access_request_endpoint": base + "/access/v1/requests",
        "jwks_uri": base + "/.well-known/jwks.json",
        "capabilities": ["urn:openid:authzen:capability:access-request"],
    }
    (key,) = h.http.get("/.well-known/jwks.json").json()["keys"]
    assert (key["kid"], key["use"], key["alg"], key["kty"], "d" in key) == (
        "treasury-dev-1",
        "sig",
        "ES256",
        "EC",
        False,
    )


def test_a_requestable_denial_carries_a_verifiable_binding_token(h: Harness):
    request = transfer(40_000)
    decision = h.evaluate(request)
    context = decision["context"]
    assert decision["decision"] is False
    assert context["reason"] == "approval_required"
    assert {"evaluation_id", "evaluated_at"} <= set(context)
    hint = context["access_request"]
    assert hint["template"] == "treasury"
    assert hint["endpoint"] == h.base_url + "/access/v1/requests"
    assert hint["display"]["title"] == "Large wire transfer"
    assert {"expires_at", "binding_token"} <= set(hint)
    jwk = jwt.PyJWK(h.http.get("/.well-known/jwks.json").json()["keys"][0])
    token = hint["binding_token"]
    assert jwt.get_unverified_header(token)["kid"] == jwk.key_id
    claims = jwt.decode(
        token,
        jwk.key,
        algorithms=["ES256"],
        audience=hint["endpoint"],
        issuer=h.base_url,
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["denial_expires_at"] == hint["expires_at"]
    assert claims["evaluation_id"] == context["evaluation_id"]
    assert claims["binding_context_members"] == ["arguments"]
    assert claims["binding_hash"] == binding_hash(
        request["subject"], request["resource"], request["action"], request["context"], ["arguments"]
    )
    assert claims["iat"] * 1000 <= CLOCK.now_ms()
    assert claims["exp"] - claims["iat"] <= 300
    assert isinstance(claims["jti"], str)
    assert len(claims["jti"]) >= 16
    assert h.evaluate(request)["context"]["access_request"]["binding_token"] != token  # fresh jti each time


def test_permits_and_plain_denials_carry_no_binding(h: Harness):
    assert h.evaluate(transfer(100)) == {"decision": True}
    assert h.evaluate(tool_call("delete_account", {"id": "1"})) == {"decision": False}


def test_requestable_denials_in_a_batch_each_get_a_token(h: Harness):
    body = {
        "subject": {"type": "user", "id": "alice"},
        "action": {"name": "tools/call"},
        "evaluations": [
            {"resource": {"type": "tool", "id": "wire_transfer"}, "context": {"arguments": {"amount": 30_000}}},
            {"resource": {"type": "tool", "id": "ledger"}},
            {"resource": {"type": "tool", "id": "wire_transfer"}, "context": {"arguments": {"amount": 31_000}}},
        ],
    }
    items = h.http.post("/access/v1/evaluations", json=body).json()["evaluations"]
    assert [item["decision"] for item in items] == [False, True, False]
    tokens = [items[i]["context"]["access_request"]["binding_token"] for i in (0, 2)]
    assert tokens[0] != tokens[1]


def test_an_issued_approval_permits_with_approved_until(h: Harness):
    request = transfer(50_001)
    approval = approved(h, request, "permit")
    decision = h.evaluate(with_approval(request, approval))
    assert decision == {"decision": True, "context": {"approval": {"approved_until": approval["approved_until"]}}}
    claims = jwt.decode(approval["state"], options={"verify_signature": False})
    assert claims["exp"] * 1000 == parse_iso8601(approval["approved_until"])  # exp == approved_until
    assert claims["aud"] == h.base_url
    assert claims["iss"] == h.base_url + "/access/v1/requests"
    assert claims["approval_id"] == approval["id"]


def test_changed_arguments_are_out_of_scope_with_a_fresh_request(h: Harness):
    request = transfer(50_002)
    approval = approved(h, request, "scope")
    decision = h.evaluate(with_approval(transfer(50_003), approval))
    context = decision["context"]
    assert (decision["decision"], context["reason"], context["next_action"]) == (False, "out_of_scope", "request")
    fresh = context["access_request"]["binding_token"]
    claims = jwt.decode(fresh, options={"verify_signature": False})
    assert claims["binding_hash"] == binding_hash(
        request["subject"], request["resource"], request["action"], transfer(50_003)["context"], ["arguments"]
    )
    # ...and that fresh denial is itself submittable.
    response = h.submit(submission(transfer(50_003), decision), key="scope-fresh")
    assert response.status_code == 202, response.text


def test_another_subject_cannot_use_the_approval(h: Harness):
    request = transfer(50_004)
    approval = approved(h, request, "subject")
    decision = h.evaluate(with_approval(transfer(50_004, who="bob"), approval))
    assert (decision["decision"], decision["context"]["reason"]) == (False, "out_of_scope")


def forged_state(h: Harness, approval: dict[str, Any], **changes: Any) -> str:
    claims = jwt.decode(approval["state"], options={"verify_signature": False})
    assert h.server is not None
    return h.server.keys.sign({**claims, **changes})


@pytest.mark.parametrize("case", ["other-key", "wrong-aud", "wrong-iss", "swapped-id", "no-state", "longer-until"])
def test_an_approval_that_does_not_verify_is_unverifiable(h: Harness, case: str):
    request = transfer(50_010)
    approval = approved(h, request, f"forge-{case}")
    other = approved(h, transfer(50_011), f"forge-{case}-other")
    if case == "other-key":
        claims = jwt.decode(approval["state"], options={"verify_signature": False})
        approval["state"] = KeySet(
            SigningKey(kid="treasury-dev-1", private_key=SigningKey.generate().private_key)
        ).sign(claims)
    elif case == "wrong-aud":
        approval["state"] = forged_state(h, approval, aud="https://another-pdp.example")
    elif case == "wrong-iss":
        approval["state"] = forged_state(h, approval, iss="https://another-ars.example")
    elif case == "swapped-id":
        approval["state"] = other["state"]
    elif case == "no-state":
        del approval["state"]
    else:
        approval["approved_until"] = "2099-01-01T00:00:00.000Z"
    decision = h.evaluate(with_approval(request, approval))
    context = decision["context"]
    assert (decision["decision"], context["reason"], context["next_action"]) == (False, "approval_unverifiable", "none")
    assert "access_request" not in context


def test_an_unknown_approval_id_with_a_validly_signed_state_is_unverifiable(h: Harness):
    request = transfer(50_020)
    approval = approved(h, request, "unknown-id")
    approval["id"] = "apr_invented"
    approval["state"] = forged_state(h, approval, approval_id="apr_invented")
    decision = h.evaluate(with_approval(request, approval))
    assert decision["context"]["reason"] == "approval_unverifiable"


def test_an_expired_approval_asks_for_a_new_request(h: Harness):
    request = transfer(50_030)
    approval = approved(h, request, "expired")
    CLOCK.advance(3600 * 1000 + 1)
    decision = h.evaluate(with_approval(request, approval))
    context = decision["context"]
    assert (decision["decision"], context["reason"], context["next_action"]) == (False, "approval_expired", "request")
    assert "binding_token" in context["access_request"]


def test_a_revoked_approval_is_expired(h: Harness):
    import asyncio

    request = transfer(50_040)
    approval = approved(h, request, "revoked")
    assert h.server is not None
    # Revocation is an administrative act on the ARS store (no wire API); do it on a second connection.
    from mcp_approval.reference.ars_store import ArapStore
    from mcp_approval.storage import open_database

    async def revoke() -> None:
        database = open_database(h.server.config.store_url())  # type: ignore[union-attr]
        try:
            await ArapStore(database).revoke(approval["id"], CLOCK.now_ms())
        finally:
            await database.close()

    asyncio.run(revoke())
    decision = h.evaluate(with_approval(request, approval))
    assert (decision["context"]["reason"], decision["context"]["next_action"]) == ("approval_expired", "request")


def test_grant_pending_asks_to_retry_later(tmp_path: Path):
    clock = ManualClock(start_ms=1_800_000_000_000)
    with running_arap(arap_dir(tmp_path, {"arap": {"grant_delay_s": 60.0}}), clock=clock) as h:
        request = transfer(60_000)
        approval = approved(h, request, "grant")
        decision = h.evaluate(with_approval(request, approval))
        assert decision == {
            "decision": False,
            "context": {"reason": "grant_pending", "next_action": "retry", "retry_after": 1},
        }
        clock.advance(60_000)
        assert h.evaluate(with_approval(request, approval))["decision"] is True
