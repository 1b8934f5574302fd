"""Alembic revisions of the passkey tables, oldest first; each spells out its own DDL."""

__all__: list[str] = []
