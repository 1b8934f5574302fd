"""The demo's credential server (scenario 11): SEP-2643 credential remediation over real HTTP.

``python -m mcp_approval.demo.credentials --port N --ledger FILE`` serves an MCP server whose
bearer tokens carry scopes and RFC 9396 ``authorization_details``:

- every request needs ``payments:read``;
- ``pay`` also needs ``payments:write``, enforced by the project's per-tool middleware
  (:func:`~mcp_approval.denials.install_tool_authorization`): a token without it gets HTTP 403
  ``insufficient_scope`` with ``scope=`` before the tool runs;
- ``transfer`` needs a token whose ``authorization_details`` are exactly this transfer's; otherwise
  the tool answers the SEP-2643 envelope ``available`` with an ``authorization_remediation`` hint
  naming them (:func:`~mcp_approval.denials.credential_remediation`).

There is no authorization server in the demo: :data:`CREDENTIALS` is a static token table that
stands in for one, and :class:`DemoIssuer` hands the client the token an AS would have issued.
The challenges, the envelopes and the retries are real.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from mcp_approval.denials import (
    ToolRequirement,
    canonical_details,
    credential_remediation,
    install_tool_authorization,
    new_context_id,
    remediation_for,
)

__all__ = ["READ", "TRANSFER", "WRITE", "DemoIssuer", "main"]

READ = "payments:read"
WRITE = "payments:write"
#: The transfer scenario 11 makes, and the authorization details it needs.
TRANSFER = {"creditor": "ACME GmbH", "amount": "12500.00", "currency": "EUR"}


def transfer_details(arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The RFC 9396 authorization details one ``transfer`` call needs."""
    return [
        {
            "type": "payment_initiation",
            "creditor": arguments.get("creditor"),
            "amount": arguments.get("amount"),
            "currency": arguments.get("currency"),
        }
    ]


@dataclass(frozen=True)
class Credential:
    """What a static token grants."""

    principal: str
    scopes: tuple[str, ...]
    authorization_details: list[dict[str, Any]] = field(default_factory=list)


#: token → credential: the tokens an authorization server would issue to alice.
CREDENTIALS: dict[str, Credential] = {
    "alice-read-token": Credential("alice", (READ,)),
    "alice-pay-token": Credential("alice", (READ, WRITE)),
    "alice-transfer-token": Credential("alice", (READ,), transfer_details(TRANSFER)),
}


class DemoIssuer:
    """Stands in for the authorization server: finds the static token a request for scopes or details would get."""

    def __init__(self, credentials: Mapping[str, Credential] = CREDENTIALS) -> None:
        self.credentials = dict(credentials)

    def for_scopes(self, scopes: Sequence[str]) -> str | None:
        """A token granting every one of ``scopes``, preferring the fewest extra."""
        fitting = [(len(c.scopes), t) for t, c in self.credentials.items() if set(scopes) <= set(c.scopes)]
        return min(fitting)[1] if fitting else None

    def for_details(self, details: Sequence[dict[str, Any]]) -> str | None:
        """A token carrying exactly these authorization details."""
        wanted = canonical_details(details)
        for token, credential in self.credentials.items():
            if credential.authorization_details and canonical_details(credential.authorization_details) == wanted:
                return token
        return None


class TableTokenVerifier:
    """Verifies the static tokens of :data:`CREDENTIALS`; the details travel in the token's claims."""

    def __init__(self, credentials: Mapping[str, Credential] = CREDENTIALS) -> None:
        self.credentials = dict(credentials)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token, or ``None`` for an unknown one."""
        credential = self.credentials.get(token)
        if credential is None:
            return None
        claims = {"authorization_details": credential.authorization_details}
        return AccessToken(
            token=token,
            client_id=credential.principal,
            subject=credential.principal,
            scopes=list(credential.scopes),
            claims=claims,
        )


class PaymentsLedger:
    """The payments tools' side effect: fsynced JSON lines, counted by the demo."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, entry: dict[str, Any]) -> None:
        """Record one executed operation durably."""
        line = json.dumps(entry, separators=(",", ":"), sort_keys=True) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())


def build_credentials_app(base_url: str, ledger: PaymentsLedger) -> Any:
    """The payments resource server's HTTP app, challenges installed."""
    mcp_url = f"{base_url}/mcp"
    server: MCPServer[Any] = MCPServer(
        "payments-demo",
        token_verifier=TableTokenVerifier(),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(base_url),
            resource_server_url=AnyHttpUrl(mcp_url),
            required_scopes=[READ],
            # The static tokens are issued for this server alone; there is no audience to compare.
            validate_token_resource=False,
        ),
        log_level="WARNING",
    )

    @server.tool()
    async def pay(amount: str) -> str:
        """Pay ``amount``; needs ``payments:write`` (the middleware checks it before this runs)."""
        ledger.append({"op": "pay", "amount": amount, "scopes": _token_scopes()})
        return f"Paid {amount}."

    @server.tool()
    async def transfer(creditor: str, amount: str, currency: str) -> types.CallToolResult:
        """Transfer money; needs a token authorizing exactly this transfer (RFC 9396)."""
        arguments = {"creditor": creditor, "amount": amount, "currency": currency}
        needed = transfer_details(arguments)
        token = get_access_token()
        held = (token.claims or {}).get("authorization_details") if token is not None else None
        if not held or canonical_details(held) != canonical_details(needed):
            remediation = remediation_for(needed, single_use=True)
            message = f"Transferring {amount} {currency} to {creditor} needs a credential authorizing this transfer."
            return credential_remediation(message, remediation, context_id=new_context_id())
        ledger.append({"op": "transfer", **arguments})
        text = f"Transferred {amount} {currency} to {creditor}."
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    app = server.streamable_http_app(json_response=True)
    metadata_url = str(build_resource_metadata_url(AnyHttpUrl(mcp_url)))
    install_tool_authorization(
        app, {"pay": ToolRequirement(scopes=frozenset({WRITE}))}, resource_metadata_url=metadata_url, base_scopes=[READ]
    )
    return app


def _token_scopes() -> list[str]:
    token = get_access_token()
    return sorted(token.scopes) if token is not None else []


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the credential server on 127.0.0.1."""
    import uvicorn

    from mcp_approval.web.proxies import KEEP_ALIVE_S

    parser = argparse.ArgumentParser(prog="python -m mcp_approval.demo.credentials")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ledger", type=Path, required=True)
    args = parser.parse_args(argv)
    base_url = f"http://127.0.0.1:{args.port}"
    app = build_credentials_app(base_url, PaymentsLedger(args.ledger))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)


if __name__ == "__main__":
    main()
