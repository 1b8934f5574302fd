"""Alembic revisions of this layer's tables, oldest first; each spells out its own DDL."""

__all__: list[str] = []
