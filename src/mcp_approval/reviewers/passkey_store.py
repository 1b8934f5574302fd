"""Where passkeys live: each reviewer's registered credentials and the challenges issued to them.

Two tables of their own history, ``passkeys``, migrated only by a deployment whose templates
require a passkey (``step_up = "passkey"``):

- ``reviewer_passkeys``: one row per credential (its id, the reviewer it belongs to, its COSE
  public key, the authenticator's signature counter). Only public keys are stored.
- ``passkey_challenges``: each challenge issued, keyed by the SHA-256 of the challenge (the
  challenge itself is never stored), with the nonce it was made from, the reviewer, what it is for
  (``register``, ``approve``, ``deny``), the request and its expiry. A challenge is taken (deleted)
  by its first use, whatever that use's outcome, so it is single-use across every worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import BigInteger, Column, Connection, Index, MetaData, String, Table, Text, delete, select, update

from mcp_approval.storage.database import Database
from mcp_approval.storage.migrations import Migrations

__all__ = [
    "PASSKEY_MIGRATIONS",
    "IssuedChallenge",
    "PasskeyRow",
    "PasskeyTables",
    "metadata",
    "passkey_challenges_table",
    "reviewer_passkeys_table",
]

#: The passkey tables' history (no release before it had them).
PASSKEY_MIGRATIONS = Migrations("passkeys", Path(__file__).with_name("passkey_schema_versions"))

metadata = MetaData()

reviewer_passkeys_table = Table(
    "reviewer_passkeys",
    metadata,
    # base64url of the credential id (WebAuthn allows up to 1023 bytes).
    Column("credential_id", String(1400), primary_key=True),
    Column("reviewer", String(256), nullable=False),
    # base64url of the COSE public key.
    Column("public_key", Text, nullable=False),
    Column("sign_count", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("used_at", BigInteger, nullable=True),
)
Index("ix_reviewer_passkeys_reviewer", reviewer_passkeys_table.c.reviewer)

passkey_challenges_table = Table(
    "passkey_challenges",
    metadata,
    # SHA-256 (hex) of the challenge bytes.
    Column("challenge_key", String(64), primary_key=True),
    # The server's random part of the challenge (hex).
    Column("nonce", String(64), nullable=False),
    Column("reviewer", String(256), nullable=False),
    # "register", "approve" or "deny".
    Column("purpose", String(16), nullable=False),
    Column("request_id", String(64), nullable=True),
    Column("expires_at", BigInteger, nullable=False),
)
Index("ix_passkey_challenges_expires", passkey_challenges_table.c.expires_at)

_K = reviewer_passkeys_table
_C = passkey_challenges_table


@dataclass(frozen=True)
class PasskeyRow:
    """A registered passkey: its credential id and public key (base64url), counter and times."""

    credential_id: str
    reviewer: str
    public_key: str
    sign_count: int
    created_at: int
    used_at: int | None


@dataclass(frozen=True)
class IssuedChallenge:
    """A challenge as issued (its nonce in hex), taken from the table by its first use."""

    nonce: str
    reviewer: str
    purpose: str
    request_id: str | None
    expires_at: int


class PasskeyTables:
    """Reads and writes the two passkey tables of one store."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def issue(self, key: str, challenge: IssuedChallenge, now: int) -> None:
        """Store an issued challenge under ``key`` (dropping every expired one on the way)."""
        values = {
            "challenge_key": key,
            "nonce": challenge.nonce,
            "reviewer": challenge.reviewer,
            "purpose": challenge.purpose,
            "request_id": challenge.request_id,
            "expires_at": challenge.expires_at,
        }

        def write(conn: Connection) -> None:
            conn.execute(delete(_C).where(_C.c.expires_at <= now))
            conn.execute(_C.insert(), values)

        await self._db.write(write)

    async def take(self, key: str, now: int) -> IssuedChallenge | None:
        """The unexpired challenge stored under ``key``, deleted in the same transaction; ``None``
        for one never issued, already taken or expired (two workers taking it: one gets it)."""

        def write(conn: Connection) -> IssuedChallenge | None:
            row = conn.execute(select(_C).where(_C.c.challenge_key == key)).mappings().first()
            if row is None or conn.execute(delete(_C).where(_C.c.challenge_key == key)).rowcount != 1:
                return None
            if row["expires_at"] <= now:
                return None
            return IssuedChallenge(row["nonce"], row["reviewer"], row["purpose"], row["request_id"], row["expires_at"])

        return await self._db.write(write)

    async def add(self, row: PasskeyRow, also: Callable[[Connection], None] | None = None) -> bool:
        """Register a passkey (running ``also`` in the same transaction, e.g. its audit event);
        ``False`` when its credential id is already registered."""

        def write(conn: Connection) -> bool:
            if conn.execute(select(_K.c.reviewer).where(_K.c.credential_id == row.credential_id)).first():
                return False
            conn.execute(_K.insert(), row.__dict__)
            if also is not None:
                also(conn)
            return True

        return await self._db.write(write)

    async def of_reviewer(self, reviewer: str) -> list[PasskeyRow]:
        """The reviewer's passkeys, oldest first."""
        query = select(_K).where(_K.c.reviewer == reviewer).order_by(_K.c.created_at, _K.c.credential_id)

        def read(conn: Connection) -> list[PasskeyRow]:
            return [PasskeyRow(**row) for row in conn.execute(query).mappings()]

        return await self._db.read(read)

    async def find(self, credential_id: str) -> PasskeyRow | None:
        """The passkey registered under ``credential_id``, if any."""
        query = select(_K).where(_K.c.credential_id == credential_id)

        def read(conn: Connection) -> PasskeyRow | None:
            row = conn.execute(query).mappings().first()
            return PasskeyRow(**row) if row is not None else None

        return await self._db.read(read)

    async def used(self, credential_id: str, sign_count: int, now: int) -> None:
        """Record a verified use: the authenticator's new counter, and when."""
        statement = update(_K).where(_K.c.credential_id == credential_id).values(sign_count=sign_count, used_at=now)
        await self._db.write(lambda conn: conn.execute(statement))
