"""``audit verify``'s check of the executions: each ran once, on a request with a sealed approval.

The chain's ``approval.execution_claimed`` events and the sealed execution records
(``approval_executions``, revision approval_0005) are compared: a claim without its record (the
record deleted), a record whose seal does not open (with the binding keys), a request or a task's
generation claimed twice, and (local backend) a request that ran without a reviewer's approval
sealed under its rules are each named. Without the binding keys the seals are not checked; the
rest is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, inspect

from mcp_approval.approval.persistence.executions import (
    CLAIM_EVENT,
    executed_requests,
    execution_findings,
)
from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.keyring import BindingCipher, binding_cipher
from mcp_approval.storage import AuditFilter, AuditLog, Database

__all__ = ["delegation_report", "execution_report", "verify_keys"]


def verify_keys(config_path: Path | None, key_file: Path | None) -> BindingCipher | None:
    """The binding keys to check seals with: ``--binding-key-file``, else the deployment file's, else none."""
    if key_file is not None:
        return binding_cipher({}, key_file=key_file)
    if config_path is None:
        return None
    from mcp_approval.cli.review import _is_arap_server_file

    if _is_arap_server_file(config_path):
        return None
    from mcp_approval.config import load_config

    config = load_config(config_path)
    options = config.approval
    if not options.binding_keys and options.binding_key_file is None:
        return None
    held = config.resolve(options.binding_key_file) if options.binding_key_file is not None else None
    return binding_cipher(options.binding_keys, key_file=held)


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


async def execution_report(database: Database, log: AuditLog, keys: BindingCipher | None) -> list[str] | None:
    """One line per execution that does not hold; ``None`` when the store holds no execution records."""
    tables = await database.read(_tables)
    if "approval_executions" not in tables:
        return None
    claims: list[tuple[int, str, dict[str, Any]]] = []
    async for event in log.export(AuditFilter()):
        if event.kind == CLAIM_EVENT:
            claims.append((event.seq or 0, event.subject or "", dict(event.data)))
    findings = await database.read(lambda conn: execution_findings(conn, claims, keys))
    if "approval_requests" not in tables:
        return findings
    requests = set(await database.read(executed_requests))
    requests |= {(str(data.get("backend")), str(data.get("request"))) for _, _, data in claims}
    backend = LocalApprovalBackend(database, templates={}, roles=lambda _principal: frozenset(), seal=keys)
    for name, handle in sorted(requests):
        if name != LocalApprovalBackend.name:
            continue
        failure = await backend.approval_failure(handle)
        if failure is not None:
            findings.append(f"request {handle} ran without a matching sealed approval: {failure}")
    return findings


async def delegation_report(database: Database, keys: BindingCipher | None) -> list[str]:
    """One line per delegation row failing its seal (with the binding keys) and per delegated decision
    no live delegation covered; none when the store keeps no delegations."""
    tables = await database.read(_tables)
    if "approval_delegations" not in tables:
        return []
    backend = LocalApprovalBackend(database, templates={}, roles=lambda _principal: frozenset(), seal=keys)
    return await backend.delegation_findings()
