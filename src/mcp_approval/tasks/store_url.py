"""Which :class:`~mcp_approval.tasks.store.TaskStore` a ``store_url`` names."""

from __future__ import annotations

from mcp_approval.clock import Clock
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.store import REDIS_URL_SCHEMES, TaskStore

__all__ = ["REDIS_URL_SCHEMES", "is_redis_url", "store_from_url"]


def is_redis_url(url: str) -> bool:
    """Whether ``url`` names a Redis store (``redis://`` or ``rediss://``)."""
    return url.partition(":")[0].lower() in REDIS_URL_SCHEMES


def store_from_url(url: str, *, clock: Clock | None = None) -> TaskStore:
    """A task store for ``url``: Redis for ``redis://``/``rediss://``, else SQL (SQLite or PostgreSQL).

    Raises:
        ValueError: an unsupported scheme, or a Redis URL without the ``redis`` package installed.
    """
    if not is_redis_url(url):
        return SqlTaskStore(url, clock=clock)
    try:
        from mcp_approval.tasks.redis_store import RedisTaskStore
    except ModuleNotFoundError as exc:
        if exc.name != "redis" and not (exc.name or "").startswith("redis."):
            raise
        raise ValueError("a redis:// store_url needs the redis package: pip install 'mcp-approval[redis]'") from exc
    return RedisTaskStore.from_url(url, clock=clock)
