"""Approval in front of the tools of a plain MCPServer: payments over 100 wait for an approver.

    python examples/library/server.py --port 8000 --db sqlite:///library.db

MCP at /mcp, the reviewer API at /approvals, the console at /console. alice pays, carol approves.
Stored calls and decisions are sealed under the keys of --binding-key-file (made on first run).
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from mcp_approval.approval import ApprovalOptions
from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend
from mcp_approval.policy import CedarPDP
from mcp_approval.server import Approvals, StaticTokenVerifier, local_auth_settings
from mcp_approval.storage import open_database

HERE = Path(__file__).parent
# Development bearer tokens (use JwtTokenVerifier in production) and the reviewers' roles.
TOKENS = {"alice-token": "alice", "carol-token": "carol"}
ROLES = {"carol": frozenset({"approver"})}


def build(db_url: str, base_url: str, ledger: Path, binding_keys: Path) -> tuple[MCPServer, Approvals]:
    """The server and its approvals: MCPServer's arguments come from approvals.server_options()."""
    database = open_database(db_url)
    approvals = Approvals(
        CedarPDP.from_files(HERE / "policy.cedar", HERE / "entities.json"),
        LocalApprovalBackend(
            database,
            templates={"payments": ApprovalTemplate(reviewer_role="approver")},
            roles=lambda principal: ROLES.get(principal, frozenset()),
        ),
        database=database,
        principals=StaticTokenVerifier(TOKENS),
        auth=local_auth_settings(base_url),
        # The keys that seal stored calls and decisions (`mcp-approval review --binding-key-file` too).
        # Clients without tasks get a real approval request too; calling again collects the outcome.
        options=ApprovalOptions(binding_key_file=binding_keys, without_tasks="request"),
    )
    server = MCPServer("payments", **approvals.server_options())

    @server.tool()
    def balance() -> str:
        """The account balance."""
        return "1000"

    @server.tool()
    def pay(to: str, amount: int) -> str:
        """Pay ``amount`` to ``to``; it runs only once policy (or an approver) allows it."""
        with ledger.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"to": to, "amount": amount}) + "\n")
        return f"paid {amount} to {to}"

    return server, approvals


def new_key_file(path: Path) -> Path:
    """``path``, holding one new random binding key if it did not exist (readable by its owner only)."""
    if not path.exists():
        key = base64.b64encode(secrets.token_bytes(32)).decode()
        path.touch(mode=0o600)
        path.write_text(f'key-1 = "{key}"\n', encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--db", default="sqlite:///library.db", help="sqlite:///PATH or postgresql://...")
    parser.add_argument("--ledger", type=Path, default=Path("payments.jsonl"), help="where pay records payments")
    parser.add_argument("--binding-key-file", type=Path, default=Path("binding-keys.toml"), help="made if missing")
    args = parser.parse_args()
    base_url = f"http://127.0.0.1:{args.port}"
    server, approvals = build(args.db, base_url, args.ledger, new_key_file(args.binding_key_file))
    # Proxy headers are honoured only from Approvals(trusted_proxies=[...]); none here.
    approvals.run(server, host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
