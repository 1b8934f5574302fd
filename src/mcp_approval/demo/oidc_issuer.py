"""The demo's own OpenID Connect issuer, for scenario 21 only: the demo runs offline, so it cannot
reach an organization's identity provider.

It is a stand-in, not a provider: no login page (it signs in whoever the scenario names), one
client, authorization code with PKCE (S256) and RS256 ID tokens. The console's side is the real
one: discovery, the key set, state, nonce, PKCE and every ID token check of
:mod:`mcp_approval.reviewers.oidc`. The tests use a real provider (node-oidc-provider) instead.
The packaged deployment names :data:`ISSUER_ADDRESS`, which the runner points at it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp_approval.hosts import unused_loopback_port

__all__ = ["DEMO_CLIENT_ID", "DEMO_CLIENT_SECRET", "ISSUER_ADDRESS", "DemoIssuer"]

#: The address the packaged deployment's ``[console.oidc] issuer`` names.
ISSUER_ADDRESS = "127.0.0.1:8095"
#: The packaged console's client at the issuer (the secret is in ``console-client-secret``).
DEMO_CLIENT_ID = "demo-console"
DEMO_CLIENT_SECRET = "demo-console-client-secret-0123456789"  # noqa: S105 (demo-only, as in the packaged file)


class DemoIssuer:
    """An OpenID Connect issuer on 127.0.0.1 that signs in :attr:`user` with :attr:`roles`."""

    def __init__(self, roles: dict[str, list[str]]) -> None:
        self.port = unused_loopback_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.roles = roles
        #: Whom the next authorization signs in (the scenario sets it, as a person would type it).
        self.user = ""
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._kid = secrets.token_hex(6)
        self._codes: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> DemoIssuer:
        """Listen in a background thread."""
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {name: values[0] for name, values in parse_qs(parts.query).items()}
                if parts.path == "/.well-known/openid-configuration":
                    self._json(200, issuer.discovery())
                elif parts.path == "/jwks":
                    self._json(200, issuer.key_set())
                elif parts.path == "/authorize":
                    location = issuer.authorize(query)
                    self.send_response(302 if location else 400)
                    if location:
                        self.send_header("location", location)
                    self.end_headers()
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
                form = {name: values[0] for name, values in parse_qs(body).items()}
                status, answer = issuer.token(form, self.headers.get("authorization", ""))
                self._json(status, answer)

            def _json(self, status: int, document: dict[str, Any]) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, name="demo-oidc", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def discovery(self) -> dict[str, Any]:
        """The discovery document."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
        }

    def key_set(self) -> dict[str, Any]:
        """The public signing key."""
        public: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        return {"keys": [{**public, "kid": self._kid, "use": "sig", "alg": "RS256"}]}

    def authorize(self, query: dict[str, str]) -> str | None:
        """Where the browser goes next: the client's redirect with a code, or ``None`` for a bad request."""
        if query.get("client_id") != DEMO_CLIENT_ID or query.get("code_challenge_method") != "S256":
            return None
        redirect = query.get("redirect_uri", "")
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = {
                "user": self.user,
                "nonce": query.get("nonce", ""),
                "challenge": query.get("code_challenge", ""),
                "redirect_uri": redirect,
            }
        return f"{redirect}?{urlencode({'code': code, 'state': query.get('state', '')})}"

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, Any]]:
        """The token endpoint: the code redeemed once, with the right client and PKCE verifier."""
        expected = "Basic " + base64.b64encode(f"{DEMO_CLIENT_ID}:{DEMO_CLIENT_SECRET}".encode()).decode()
        if not hmac.compare_digest(authorization.encode(), expected.encode()):
            return 401, {"error": "invalid_client"}
        with self._lock:
            grant = self._codes.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "").encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
        if grant is None or grant["challenge"] != challenge or grant["redirect_uri"] != form.get("redirect_uri"):
            return 400, {"error": "invalid_grant"}
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": DEMO_CLIENT_ID,
            "sub": grant["user"],
            "nonce": grant["nonce"],
            "iat": now,
            "exp": now + 300,
            "roles": self.roles.get(grant["user"], []),
        }
        id_token = jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": self._kid})
        return 200, {"id_token": id_token, "token_type": "Bearer", "access_token": secrets.token_urlsafe(16)}
