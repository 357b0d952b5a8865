"""Alembic revisions, oldest first by ``down_revision``."""
