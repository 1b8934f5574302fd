"""``JwtTokenVerifier``: RFC 9068 access tokens checked against a key set, and rotation over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_approval.clock import ManualClock
from mcp_approval.server.jwt_auth import JwksError, JwtTokenVerifier, keys_of, scopes_of
from tests.support.oauth_server import bound_socket, serve_app

pytestmark = pytest.mark.anyio

ISSUER = "https://login.example.test"
AUDIENCE = "https://mcp.example.test/mcp"
NOW_S = 1_780_000_000


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_jwk(key: Any, kid: str, **extra: str) -> dict[str, Any]:
    algorithm = ECAlgorithm if isinstance(key, ec.EllipticCurvePrivateKey) else RSAAlgorithm
    return {**json.loads(algorithm.to_jwk(key.public_key())), "kid": kid, "use": "sig", **extra}


def token(key: Any, kid: str | None = "k1", *, alg: str = "ES256", typ: str = "at+jwt", **claims: Any) -> str:
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW_S + 300, "iat": NOW_S, **claims}
    body = {name: value for name, value in body.items() if value is not None}
    headers: dict[str, Any] = {"typ": typ} if kid is None else {"typ": typ, "kid": kid}
    return jwt.encode(body, key, algorithm=alg, headers=headers)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW_S * 1000)


@pytest.fixture
def signing_key() -> ec.EllipticCurvePrivateKey:
    return ec_key()


@pytest.fixture
def verifier(signing_key: ec.EllipticCurvePrivateKey, clock: ManualClock) -> JwtTokenVerifier:
    return JwtTokenVerifier(
        issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [public_jwk(signing_key, "k1")]}, clock=clock
    )


async def test_a_valid_access_token_names_its_principal_scopes_and_client(verifier, signing_key):
    access = await verifier.verify_token(token(signing_key, scope="tools payments:write", client_id="agent-7"))
    assert access is not None
    assert (access.subject, access.client_id, access.scopes) == ("alice", "agent-7", ["tools", "payments:write"])
    assert access.expires_at == NOW_S + 300
    assert access.resource == AUDIENCE
    assert access.claims == {"iss": ISSUER}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"iss": "https://evil.example.test"}, "another issuer"),
        ({"aud": "https://other.example.test/mcp"}, "another audience"),
        ({"aud": None}, "no audience"),
        ({"exp": None}, "no expiry"),
        ({"exp": NOW_S - 31}, "expired beyond the leeway"),
        ({"nbf": NOW_S + 31}, "not valid yet"),
        ({"iat": NOW_S + 31}, "issued in the future"),
        ({"exp": "tomorrow"}, "a non-numeric expiry"),
        ({"sub": None}, "no principal"),
        ({"sub": ""}, "an empty principal"),
    ],
)
async def test_claims_that_do_not_check_out_are_refused(verifier, signing_key, change, why):
    assert await verifier.verify_token(token(signing_key, **change)) is None, why


async def test_the_leeway_tolerates_small_clock_skew(verifier, signing_key, clock):
    assert await verifier.verify_token(token(signing_key, exp=NOW_S - 29, nbf=NOW_S + 29)) is not None
    clock.advance(2_000)
    assert await verifier.verify_token(token(signing_key, exp=NOW_S - 29)) is None


async def test_a_signature_by_another_key_under_the_same_kid_is_refused(verifier):
    assert await verifier.verify_token(token(ec_key(), "k1")) is None


async def test_unsigned_and_hmac_tokens_are_refused_even_with_the_public_key_as_secret(verifier, signing_key):
    unsigned = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW_S + 60}, None, algorithm="none")
    assert await verifier.verify_token(unsigned) is None
    # Algorithm confusion: an HS256 MAC keyed with the published public key (built by hand:
    # PyJWT itself refuses to sign with a JWK as the secret).
    secret = json.dumps(public_jwk(signing_key, "k1")).encode()
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW_S + 60}
    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'at+jwt', 'kid': 'k1'}))}.{b64(json.dumps(claims))}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    forged = f"{signing_input}.{b64(mac)}"
    assert jwt.get_unverified_header(forged)["alg"] == "HS256"
    assert await verifier.verify_token(forged) is None


async def test_only_access_token_types_are_accepted_unless_configured(signing_key, clock):
    jwks = {"keys": [public_jwk(signing_key, "k1")]}
    strict = JwtTokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=jwks, clock=clock)
    lenient = JwtTokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=jwks, clock=clock, token_types=["at+jwt", "JWT"])
    id_token_shaped = token(signing_key, typ="JWT")
    assert await strict.verify_token(id_token_shaped) is None
    assert await lenient.verify_token(id_token_shaped) is not None
    assert await strict.verify_token(token(signing_key, typ="application/AT+JWT")) is not None


async def test_a_key_is_used_only_for_its_own_type_and_algorithm(clock):
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = {"keys": [public_jwk(rsa_key, "r1", alg="RS256")]}
    verifier = JwtTokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=jwks, clock=clock, algorithms=["RS256", "PS256"])
    assert await verifier.verify_token(token(rsa_key, "r1", alg="RS256")) is not None
    assert await verifier.verify_token(token(rsa_key, "r1", alg="PS256")) is None  # the JWK pins RS256
    assert await verifier.verify_token(token(ec_key(), "r1", alg="ES256")) is None  # not an allowed alg


async def test_a_token_without_kid_is_accepted_only_when_the_set_has_one_key(signing_key, clock):
    one = JwtTokenVerifier(
        issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [public_jwk(signing_key, "k1")]}, clock=clock
    )
    two = JwtTokenVerifier(
        issuer=ISSUER,
        audience=AUDIENCE,
        jwks={"keys": [public_jwk(signing_key, "k1"), public_jwk(ec_key(), "k2")]},
        clock=clock,
    )
    assert await one.verify_token(token(signing_key, None)) is not None
    assert await two.verify_token(token(signing_key, None)) is None


async def test_garbage_is_not_a_token(verifier):
    odd_headers = [{"alg": ["ES256"], "typ": "at+jwt"}, {"alg": "ES256", "typ": {"x": 1}}, {"alg": "ES256", "kid": 7}]
    crafted = [f"{b64(json.dumps(header))}.{b64('{}')}.{b64('sig')}" for header in odd_headers]
    for text in ("", "abc", "a.b.c", "eyJhbGciOiJFUzI1NiJ9.e30.", *crafted):
        assert await verifier.verify_token(text) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"algorithms": ["HS256"]}, "asymmetric"),
        ({"algorithms": ["none"]}, "asymmetric"),
        ({"algorithms": []}, "asymmetric"),
        ({"jwks": None}, "exactly one"),
        ({"jwks_url": "https://login.example.test/jwks"}, "exactly one"),
        ({"token_types": []}, "typ"),
        ({"issuer": ""}, "issuer"),
    ],
)
def test_unsafe_or_incomplete_settings_are_refused(options, message):
    settings: dict[str, Any] = {"issuer": ISSUER, "audience": AUDIENCE, "jwks": {"keys": [public_jwk(ec_key(), "k")]}}
    with pytest.raises(ValueError, match=message):
        JwtTokenVerifier(**{**settings, **options})


def test_a_key_set_without_a_usable_signing_key_is_refused():
    private = {**public_jwk(ec_key(), "p"), "d": "AAAA"}
    with pytest.raises(JwksError, match="no usable signing key"):
        keys_of({"keys": [{**public_jwk(ec_key(), "e"), "use": "enc"}, private]}, source="jwks.json")
    with pytest.raises(JwksError, match=r"jwks\.json: not a JSON Web Key Set"):
        keys_of({"kid": "x"}, source="jwks.json")


def test_scopes_come_from_a_string_or_a_list():
    assert scopes_of("a b  c") == ["a", "b", "c"]
    assert scopes_of(["a", 3, "b"]) == ["a", "b"]
    assert scopes_of(None) == []


# -- a key set served over HTTP: rotation and refetch limits --------------------------------


class KeySetServer:
    """A JWKS endpoint on 127.0.0.1 whose keys the test changes; it counts the fetches."""

    def __init__(self, sock: socket.socket) -> None:
        self.keys: list[dict[str, Any]] = []
        self.fetches = 0
        self.status = 200
        self.app = Starlette(routes=[Route("/jwks", self.serve)])
        self.sock = sock

    async def serve(self, _request: Request) -> JSONResponse:
        self.fetches += 1
        return JSONResponse({"keys": self.keys}, status_code=self.status)


@pytest.fixture
def key_server() -> Iterator[tuple[KeySetServer, str]]:
    sock = bound_socket()
    server = KeySetServer(sock)
    with serve_app(server.app, sock) as base:
        yield server, f"{base}/jwks"


async def test_a_rotated_key_is_fetched_once_and_forged_kids_do_not_flood_the_issuer(key_server, clock):
    server, url = key_server
    old, new = ec_key(), ec_key()
    server.keys = [public_jwk(old, "old")]
    verifier = JwtTokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, clock=clock, min_refresh_s=30)
    assert await verifier.verify_token(token(old, "old")) is not None
    assert server.fetches == 1
    # The issuer rotates: a token under the new kid makes the verifier fetch again (once the
    # minimum interval has passed), and the old key, still published, keeps working.
    server.keys = [public_jwk(new, "new"), public_jwk(old, "old")]
    clock.advance(31_000)
    assert await verifier.verify_token(token(new, "new")) is not None
    assert server.fetches == 2
    # A burst of made-up kids costs no fetch inside the interval.
    for index in range(20):
        assert await verifier.verify_token(token(ec_key(), f"forged-{index}")) is None
    assert server.fetches == 2
    assert await verifier.verify_token(token(old, "old")) is not None


async def test_an_unreachable_or_broken_key_set_keeps_the_keys_held(key_server, clock):
    server, url = key_server
    key = ec_key()
    server.keys = [public_jwk(key, "k1")]
    verifier = JwtTokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, clock=clock, refresh_s=60)
    assert await verifier.verify_token(token(key, "k1")) is not None
    server.status = 503
    clock.advance(61_000)  # stale: the next token fetches, fails, and the held key still verifies
    assert await verifier.verify_token(token(key, "k1")) is not None
    assert server.fetches == 2


async def test_a_key_set_that_never_loads_accepts_nothing(clock):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/jwks"  # nothing listens once closed
    verifier = JwtTokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, clock=clock, timeout_s=2)
    assert await verifier.verify_token(token(ec_key(), "k1")) is None
