"""``WWW-Authenticate`` values: built by the server side, read back by ours and by the SDK's parser."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth

from mcp_approval.client.denials import read_challenge
from mcp_approval.denials import (
    authentication_required,
    decode_remediation,
    encode_remediation,
    insufficient_authorization,
    insufficient_scope,
    remediation_for,
)
from mcp_approval.denials.references import AuthorizationReferences

METADATA = "https://mcp.example.com/.well-known/oauth-protected-resource"
PAYMENT = {
    "type": "payment_initiation",
    "instructedAmount": {"currency": "EUR", "amount": "123.50"},
    "creditorName": "Zoë",
}


def sdk(header: str, field: str) -> str | None:
    return extract_field_from_www_auth(httpx.Response(403, headers={"WWW-Authenticate": header}), field)


@pytest.mark.sep_check("sep-2643-server-scope-challenge")
def test_insufficient_scope_matches_the_example():
    header = insufficient_scope(["read", "write"], resource_metadata=METADATA)
    assert header == f'Bearer error="insufficient_scope", scope="read write", resource_metadata="{METADATA}"'
    assert extract_scope_from_www_auth(httpx.Response(403, headers={"WWW-Authenticate": header})) == "read write"


def test_scopes_are_validated_and_deduplicated():
    assert 'scope="a b"' in insufficient_scope(["a", "b", "a"], resource_metadata=METADATA)
    for bad in ("has space", 'quote"', "back\\slash", ""):
        with pytest.raises(ValueError, match="scope token"):
            insufficient_scope([bad], resource_metadata=METADATA)
    with pytest.raises(ValueError, match="at least one"):
        insufficient_scope([], resource_metadata=METADATA)


@pytest.mark.sep_check("sep-2643-server-rar-challenge")
def test_insufficient_authorization_carries_unpadded_base64url_json():
    remediation = remediation_for([PAYMENT], single_use=False, references=AuthorizationReferences(b"k" * 32))
    header = insufficient_authorization(remediation, resource_metadata=METADATA)
    assert header.startswith(
        f'Bearer error="insufficient_authorization", resource_metadata="{METADATA}", '
        'error_description="Additional authorization is required", authorization_remediation="'
    )
    value = sdk(header, "authorization_remediation")
    assert value is not None
    assert "=" not in value
    document = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    assert document == remediation.document()
    assert document["authorization_reference"] == remediation.authorization_reference
    assert decode_remediation(value) == remediation
    assert decode_remediation(value + "=" * (-len(value) % 4)) == remediation  # padded is read too


def test_unauthenticated_challenges():
    assert authentication_required(["read"], resource_metadata=METADATA, credentials_presented=False) == (
        f'Bearer scope="read", resource_metadata="{METADATA}"'
    )
    assert authentication_required([], resource_metadata=METADATA, credentials_presented=True) == (
        f'Bearer error="invalid_token", resource_metadata="{METADATA}"'
    )


def test_descriptions_are_escaped_and_control_characters_refused():
    header = insufficient_scope(["w"], resource_metadata=METADATA, description='say "hi" \\ bye')
    assert header.endswith('error_description="say \\"hi\\" \\\\ bye"')
    assert read_challenge(403, header).denial.description == 'say "hi" \\ bye'
    with pytest.raises(ValueError, match="control character"):
        insufficient_scope(["w"], resource_metadata=METADATA, description="a\r\nSet-Cookie: x")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        pytest.param("not base64!", "not base64url", id="alphabet"),
        pytest.param("A" * 30_000, "the limit is", id="too-long"),
        pytest.param(base64.urlsafe_b64encode(b"\xff\xfe").decode(), "does not decode", id="not-utf8"),
        pytest.param(base64.urlsafe_b64encode(b"[1,2]").decode(), "not a JSON object", id="array"),
        pytest.param(base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode(), "does not decode", id="deep"),
        pytest.param(base64.urlsafe_b64encode(b'{"authorization_details": []}').decode(), "ill-formed", id="empty"),
        pytest.param(
            base64.urlsafe_b64encode(b'{"authorization_details": [{"type": "x", "v": NaN}]}').decode(),
            "non-finite",
            id="nan",
        ),
    ],
)
def test_hostile_remediation_parameters_are_rejected_with_a_reason(value, why):
    with pytest.raises(ValueError, match=why):
        decode_remediation(value)
    reading = read_challenge(401, f'Bearer error="insufficient_authorization", authorization_remediation="{value}"')
    assert reading.denial is None
    assert reading.problem


@pytest.mark.sep_check("sep-2643-challenge-means-available", "sep-2643-client-bare-403-unclassified")
def test_reading_challenges():
    scope = read_challenge(403, 'Bearer error="insufficient_scope", scope="read write"')
    assert scope.denial.scopes == ("read", "write")
    assert (scope.denial.reason, scope.denial.remediation_posture) == ("insufficient_authorization", "available")
    transaction = read_challenge(
        401, 'Bearer error="transaction_authorization_required", transaction_challenge="eyJ.a.b"'
    )
    assert transaction.denial.transaction_challenge == "eyJ.a.b"
    assert read_challenge(403, "Bearer").denial is None
    assert "not a classifiable denial" in read_challenge(403, 'Bearer realm="x"').problem
    assert read_challenge(403, None).problem == "HTTP 403 without a challenge cannot be classified"
    assert read_challenge(401, 'Bearer error="invalid_token"').denial is None
    assert read_challenge(200, 'Bearer error="insufficient_scope"').denial is None


def test_the_reader_handles_several_schemes_unquoted_values_and_case():
    header = 'DPoP algs="ES256", BEARER Error=insufficient_scope, Scope="a b", resource_metadata=https://x.example/m'
    reading = read_challenge(403, header)
    assert reading.denial.scopes == ("a", "b")
    assert reading.denial.resource_metadata == "https://x.example/m"
    only_dpop = read_challenge(401, 'DPoP error="insufficient_scope", scope="a"')
    assert "no Bearer challenge" in only_dpop.problem
    duplicated = read_challenge(403, 'Bearer error="insufficient_scope", scope="a", scope="b"')
    assert "appears twice" in duplicated.problem
    assert read_challenge(403, 'Bearer error="unterminated').problem
    assert read_challenge(403, "Bearer " + "a" * 40_000).problem


@given(
    st.lists(
        st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters='"\\'), min_size=1),
        min_size=1,
        max_size=5,
    ),
    st.text(max_size=40).filter(lambda s: all(ord(c) >= 0x20 and ord(c) != 0x7F for c in s)),
)
def test_our_reader_reads_back_what_we_build(scopes, description):
    header = insufficient_scope(scopes, resource_metadata=METADATA, description=description or None)
    denial = read_challenge(403, header).denial
    assert denial.scopes == tuple(dict.fromkeys(scopes))
    assert denial.resource_metadata == METADATA
    assert denial.description == (description or None)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"type": st.text(min_size=1, max_size=20)},
            optional={"v": st.one_of(st.integers(), st.text(max_size=20), st.booleans(), st.none())},
        ),
        min_size=1,
        max_size=4,
    )
)
def test_remediation_round_trips_through_the_header(details):
    remediation = remediation_for(details, single_use=True)
    assert decode_remediation(encode_remediation(remediation)) == remediation
    header = insufficient_authorization(remediation, resource_metadata=METADATA)
    assert read_challenge(401, header).denial.remediation == remediation
