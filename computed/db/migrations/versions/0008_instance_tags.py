"""instances: tags

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

Issue 24 item 13: a server's tags (Nova's 2.26: at most 50 strings of at most 60 characters),
a JSON list beside the server's metadata, so that a server is read in one row and its tags are
changed under that row's lock. Expand only: a nullable column (rows before have none).
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.add_column(sa.Column("tags", sa.Text(), nullable=True))


def downgrade() -> None:
    # In place (as 0004): copying instances would have to leave out its generated column.
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.drop_column("tags")
