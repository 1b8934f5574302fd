"""Where a chat channel posted each request's message: its ``chat_messages`` table and history.

A Slack channel posts one message per request and rewrites it as decisions come and at the end,
so it keeps the message's address (Slack's conversation id and message ``ts``) here, in the
deployment's store: any worker that delivers the next event, or receives a click on the
message, finds it. The history ``notify`` is migrated only by a deployment with such a channel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import BigInteger, Column, Connection, MetaData, String, Table, delete, select
from sqlalchemy.exc import IntegrityError

from mcp_approval.storage.database import Database
from mcp_approval.storage.migrations import Migrations

__all__ = ["NOTIFY_MIGRATIONS", "ChatMessage", "ChatMessages", "chat_messages_table", "metadata"]

#: The notification channels' history (no release before it had this table).
NOTIFY_MIGRATIONS = Migrations("notify", Path(__file__).with_name("schema_versions"))

metadata = MetaData()

chat_messages_table = Table(
    "chat_messages",
    metadata,
    # The channel's name under [notifications.channels].
    Column("channel", String(100), primary_key=True),
    Column("request_id", String(64), primary_key=True),
    # Where the platform keeps it: Slack's conversation id and message timestamp.
    Column("conversation", String(100), nullable=False),
    Column("message", String(100), nullable=False),
    Column("posted_at", BigInteger, nullable=False),
)
_T = chat_messages_table


@dataclass(frozen=True)
class ChatMessage:
    """A posted message's address: the conversation it is in and its id there."""

    conversation: str
    message: str


class ChatMessages:
    """The messages one channel posted, by request.

    Args:
        database: the deployment's store.
        channel: the channel's name.
    """

    def __init__(self, database: Database, channel: str) -> None:
        self._database = database
        self._channel = channel

    async def find(self, request_id: str) -> ChatMessage | None:
        """The message posted about ``request_id``, if any."""
        query = select(_T.c.conversation, _T.c.message).where(
            _T.c.channel == self._channel, _T.c.request_id == request_id
        )

        def read(conn: Connection) -> ChatMessage | None:
            row = conn.execute(query).first()
            return ChatMessage(str(row.conversation), str(row.message)) if row is not None else None

        return await self._database.read(read)

    async def remember(self, request_id: str, message: ChatMessage, at_ms: int, *, replace: bool = False) -> None:
        """Record the message posted about ``request_id``.

        A message already recorded stays (two workers posted: the first wins), unless ``replace``
        (the recorded one is gone and this one was posted instead).
        """
        values = {
            "channel": self._channel,
            "request_id": request_id,
            "conversation": message.conversation,
            "message": message.message,
            "posted_at": at_ms,
        }

        def write(conn: Connection) -> None:
            if replace:
                conn.execute(delete(_T).where(_T.c.channel == self._channel, _T.c.request_id == request_id))
            conn.execute(_T.insert(), values)

        try:
            await self._database.write(write)
        except IntegrityError:  # another worker posted it first (after a lost lease): keep its message
            return
