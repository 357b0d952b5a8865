"""instances: the build's scheduler hints

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26

Issue 22: the compute API answers a create once its servers are admitted and places them in the
background; a server whose API process died before placing it is placed by another, which needs
the build's scheduler hints (os:scheduler_hints) from the row. Expand only: a nullable column
(rows before have none, and the previous release never reads it).
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.add_column(sa.Column("scheduler_hints", sa.Text(), nullable=True))


def downgrade() -> None:
    # In place (as 0004): copying instances would have to leave out its generated column.
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.drop_column("scheduler_hints")
