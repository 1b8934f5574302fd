"""The ARAP binding_hash (JCS + SHA-256) and the ES256 key set, without a server."""

from __future__ import annotations

import logging
from typing import Any

import jwt
import pytest

from mcp_approval.reference.binding import binding_hash, project
from mcp_approval.reference.signing import KeySet, SigningKey, TokenError, load_key_set

ALICE = {"type": "user", "id": "alice@example.com"}
Q4 = {"type": "document", "id": "q4-plan"}
READ = {"name": "can_read"}


def test_known_answer_of_the_catalog_profile_example():
    # The binding_hash carried by the ARAP catalog example's token (empty member set, empty context).
    assert binding_hash(ALICE, Q4, READ, {}, []) == "jy2Na0olk8TuIQE3wxOjXWDCKxtviYbrPjBYSmyF6o8"
    # No context at all binds the same: the projected context is always an (empty) object.
    assert binding_hash(ALICE, Q4, READ, None, []) == "jy2Na0olk8TuIQE3wxOjXWDCKxtviYbrPjBYSmyF6o8"


def test_unbound_context_members_do_not_change_the_hash():
    noisy = {"time": "2026-01-01T00:00:00Z", "nonce": 7}
    assert binding_hash(ALICE, Q4, READ, noisy, []) == binding_hash(ALICE, Q4, READ, {}, [])


def test_absent_and_null_members_differ():
    absent = binding_hash(ALICE, Q4, READ, {}, ["ip"])
    null = binding_hash(ALICE, Q4, READ, {"ip": None}, ["ip"])
    assert absent != null
    assert project({"ip": None}, ["ip"]) == {"ip": None}
    assert project({}, ["ip"]) == {}


def test_numbers_compare_in_canonical_form_and_arrays_in_order():
    assert binding_hash(ALICE, Q4, READ, {"n": 1.0}, ["n"]) == binding_hash(ALICE, Q4, READ, {"n": 1}, ["n"])
    assert binding_hash(ALICE, Q4, READ, {"a": [1, 2]}, ["a"]) != binding_hash(ALICE, Q4, READ, {"a": [2, 1]}, ["a"])


def test_member_order_in_objects_does_not_matter():
    one = binding_hash(ALICE, Q4, READ, {"args": {"a": 1, "b": 2}}, ["args"])
    assert one == binding_hash(ALICE, Q4, READ, {"args": {"b": 2, "a": 1}}, ["args"])


def test_the_actor_chain_is_not_bound_but_other_properties_are():
    with_actor = {**ALICE, "properties": {"dept": "fin", "act": {"sub": "agent-1"}}}
    other_actor = {**ALICE, "properties": {"dept": "fin", "act": {"sub": "agent-2"}}}
    other_dept = {**ALICE, "properties": {"dept": "ops", "act": {"sub": "agent-1"}}}
    assert binding_hash(with_actor, Q4, READ, {}, []) == binding_hash(other_actor, Q4, READ, {}, [])
    assert binding_hash(with_actor, Q4, READ, {}, []) != binding_hash(other_dept, Q4, READ, {}, [])


def test_machinery_members_never_bind():
    machinery = {"approval": {"id": "x"}, "evaluation_id": "e", "reason": "r"}
    members = ["approval", "evaluation_id", "reason"]
    assert binding_hash(ALICE, Q4, READ, machinery, members) == binding_hash(ALICE, Q4, READ, {}, [])


def claims(**extra: Any) -> dict[str, Any]:
    return {"iss": "https://pdp", "aud": "https://pdp/access/v1/requests", "iat": 1000, "exp": 2000, **extra}


def test_a_token_verifies_with_its_key_set_and_the_published_jwk():
    keys = KeySet(SigningKey.generate("k1"))
    token = keys.sign(claims(jti="j"))
    assert jwt.get_unverified_header(token) == {"alg": "ES256", "kid": "k1", "typ": "JWT"}
    assert keys.verify(token, issuer="https://pdp", audience="https://pdp/access/v1/requests", now_s=1500)["jti"] == "j"
    (jwk,) = keys.jwks()["keys"]
    assert (jwk["kid"], jwk["use"], jwk["alg"], jwk["crv"], "d" in jwk) == ("k1", "sig", "ES256", "P-256", False)
    public = jwt.PyJWK(jwk).key
    decoded = jwt.decode(token, public, algorithms=["ES256"], audience=claims()["aud"], options={"verify_exp": False})
    assert decoded["jti"] == "j"


@pytest.mark.parametrize(
    ("case", "expired"),
    [("wrong-aud", False), ("wrong-iss", False), ("other-key", False), ("unknown-kid", False), ("expired", True)],
)
def test_a_token_that_does_not_verify_is_refused(case: str, expired: bool):
    keys = KeySet(SigningKey.generate("k1"))
    other = KeySet(SigningKey(kid="k1", private_key=SigningKey.generate().private_key))
    stranger = KeySet(SigningKey.generate("k2"))
    token = {
        "wrong-aud": keys.sign(claims(aud="https://elsewhere")),
        "wrong-iss": keys.sign(claims(iss="https://elsewhere")),
        "other-key": other.sign(claims()),
        "unknown-kid": stranger.sign(claims()),
        "expired": keys.sign(claims()),
    }[case]
    now = 2100 if case == "expired" else 1500
    with pytest.raises(TokenError) as raised:
        keys.verify(token, issuer="https://pdp", audience="https://pdp/access/v1/requests", now_s=now)
    assert raised.value.expired is expired


def test_alg_none_and_garbage_are_refused():
    keys = KeySet(SigningKey.generate("k1"))
    unsigned = jwt.encode(claims(), key=None, algorithm="none", headers={"kid": "k1"})
    for token in (unsigned, "a.b.c", 42, None, "nodots"):
        with pytest.raises(TokenError):
            keys.verify(token, issuer="https://pdp", audience="https://pdp/access/v1/requests", now_s=1500)


def test_an_ephemeral_key_only_in_dev_mode_and_with_a_warning(caplog: pytest.LogCaptureFixture, tmp_path: Any):
    with pytest.raises(ValueError, match="signing_key_file"):
        load_key_set(None, "k", dev_mode=False)
    with caplog.at_level(logging.WARNING, logger="mcp_approval.reference"):
        load_key_set(None, "k", dev_mode=True)
    assert any(r.levelno == logging.WARNING and "per-process key" in r.message for r in caplog.records)
    pem = tmp_path / "key.pem"
    pem.write_bytes(SigningKey.generate().to_pem())
    assert load_key_set(pem, "file-key", dev_mode=False).jwks()["keys"][0]["kid"] == "file-key"
    (tmp_path / "bad.pem").write_text("not a key")
    with pytest.raises(ValueError, match=r"bad\.pem"):
        load_key_set(tmp_path / "bad.pem", "k", dev_mode=True)
