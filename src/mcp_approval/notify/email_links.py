"""The decision links e-mail channels send: their ``email_links`` table, and what binds a link.

A link carries a token of 256 random bits. The table keeps only its SHA-256, so a copy of the
database (a backup, a replica) holds no usable link. Each row binds the token to one channel,
one request, one reviewer and the request's content digest (:func:`content_digest`) as it was
when the message was sent, and ends at ``expires_at`` (never after the request's deadline). A
row is used once: :meth:`EmailLinks.burn` marks it used, in the same transaction as the audit
event that says the link was used, before any decision is recorded.

Rows are written before their message is sent and marked sent after, so a message the outbox
sends again (after a failed or lost attempt) goes only to the reviewers not yet written to, each
with a new link (a reviewer who got a message whose sending was not confirmed gets a new one,
and the first link stops working).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

import rfc8785
from sqlalchemy import BigInteger, Column, Connection, Index, String, Table, UniqueConstraint, delete, select, update
from sqlalchemy.exc import IntegrityError

from mcp_approval.backends import ApprovalRecord
from mcp_approval.notify.chat_messages import metadata
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = ["LINK_USED_EVENT", "EmailLink", "EmailLinks", "content_digest", "email_links_table", "token_hash"]

#: The audit event a link's use writes (before the decision it leads to).
LINK_USED_EVENT = "approval.link_used"

email_links_table = Table(
    "email_links",
    metadata,
    # SHA-256 (hex) of the link's token; the token itself is stored nowhere.
    Column("token_hash", String(64), primary_key=True),
    Column("channel", String(100), nullable=False),
    Column("request_id", String(64), nullable=False),
    Column("reviewer", String(200), nullable=False),
    # content_digest() of the request when the message was sent.
    Column("content_digest", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    # When the SMTP server accepted the message (NULL: not confirmed; a retry replaces the link).
    Column("sent_at", BigInteger, nullable=True),
    # When the link decided (NULL: unused).
    Column("used_at", BigInteger, nullable=True),
    UniqueConstraint("channel", "request_id", "reviewer", name="uq_email_links_reviewer"),
    Index("ix_email_links_request", "request_id"),
)
_T = email_links_table


def token_hash(token: str) -> str:
    """The SHA-256 (hex) a token is stored and looked up as."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def content_digest(record: ApprovalRecord, call_digest: str | None) -> str:
    """SHA-256 (hex) of what a reviewer is asked to decide: the request's content and rules.

    ``call_digest`` is the backend's sealed digest of the full arguments (redacted ones
    included), when it seals; the arguments as reviewers see them, the texts, the requester, the
    template, the rules and the deadline are covered in any case. Any change to them, or a
    request whose stored rows fail their seals, gives another digest, so its links stop working.
    """
    document: dict[str, Any] = {
        "request_id": record.id,
        "tool": record.tool,
        "arguments": dict(record.arguments),
        "call_digest": call_digest,
        "requester": record.requester,
        "template": record.template,
        "title": record.title,
        "description": record.description,
        "reason": record.reason,
        "inputs": dict(record.inputs),
        "approvals_required": record.approvals_required,
        "expires_at": record.expires_at,
        "rules": record.rules.to_text() if record.rules is not None else None,
        "integrity_failure": record.integrity_failure,
    }
    return hashlib.sha256(rfc8785.dumps(document)).hexdigest()


@dataclass(frozen=True)
class EmailLink:
    """One stored link: whom and what it is bound to, until when, and whether it was used."""

    token_hash: str
    channel: str
    request_id: str
    reviewer: str
    content_digest: str
    expires_at: int
    sent_at: int | None
    used_at: int | None


class EmailLinks:
    """The links of every e-mail channel on one store.

    Args:
        database: the deployment's store.
        audit: where a link's use is recorded.
    """

    def __init__(self, database: Database, audit: AuditLog) -> None:
        self._database = database
        self._audit = audit

    async def issue(
        self, channel: str, request_id: str, reviewer: str, digest: str, now_ms: int, expires_at: int
    ) -> str | None:
        """A new token for ``reviewer`` on ``request_id``, stored as its hash; ``None`` when a
        message with a link was already sent to them (nothing is then written).

        A link whose message was never confirmed sent is replaced.
        """
        token = secrets.token_urlsafe(32)  # 256 bits
        where = (_T.c.channel == channel, _T.c.request_id == request_id, _T.c.reviewer == reviewer)
        values = {
            "token_hash": token_hash(token),
            "channel": channel,
            "request_id": request_id,
            "reviewer": reviewer,
            "content_digest": digest,
            "created_at": now_ms,
            "expires_at": expires_at,
        }

        def write(conn: Connection) -> bool:
            sent = conn.execute(select(_T.c.sent_at).where(*where)).first()
            if sent is not None and sent.sent_at is not None:
                return False
            conn.execute(delete(_T).where(*where, _T.c.sent_at.is_(None)))
            conn.execute(_T.insert(), values)
            return True

        try:
            fresh = await self._database.write(write)
        except IntegrityError:  # another worker wrote this reviewer's link at the same moment
            return None
        return token if fresh else None

    async def sent(self, token: str, now_ms: int) -> None:
        """Record that the message carrying ``token`` was accepted by the SMTP server."""
        statement = update(_T).where(_T.c.token_hash == token_hash(token)).values(sent_at=now_ms)
        await self._database.write(lambda conn: conn.execute(statement))

    async def find(self, token: str) -> EmailLink | None:
        """The stored link of ``token``, or ``None``."""
        query = select(_T).where(_T.c.token_hash == token_hash(token))

        def read(conn: Connection) -> EmailLink | None:
            row = conn.execute(query).mappings().first()
            return EmailLink(**{name: row[name] for name in EmailLink.__dataclass_fields__}) if row else None

        return await self._database.read(read)

    async def burn(self, link: EmailLink, now_ms: int, decision: str) -> bool:
        """Mark ``link`` used and record so in the audit log, in one transaction; ``False`` when it
        was used already (by a concurrent request too: nothing is then written)."""
        statement = update(_T).where(_T.c.token_hash == link.token_hash, _T.c.used_at.is_(None)).values(used_at=now_ms)
        data = {"channel": link.channel, "decision": decision, "link": link.token_hash[:16]}

        def write(conn: Connection) -> bool:
            if conn.execute(statement).rowcount != 1:
                return False
            self._audit.record_in(
                conn, now_ms, LINK_USED_EVENT, subject=link.request_id, actor=link.reviewer, data=data
            )
            return True

        return await self._database.write(write)

    async def retire(self, request_id: str, now_ms: int) -> None:
        """End every link to ``request_id`` now (it takes no more decisions)."""
        statement = update(_T).where(_T.c.request_id == request_id, _T.c.expires_at > now_ms).values(expires_at=now_ms)
        await self._database.write(lambda conn: conn.execute(statement))
