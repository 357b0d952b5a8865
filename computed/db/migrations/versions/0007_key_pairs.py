"""key_pairs; instances: key_name, key_type, key_data, user_data, config_drive

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26

Issue 24 item 11: a user who gets a bare-metal server must be able to log into it.
``key_pairs`` holds each user's key pairs (``os-keypairs``; a name is unique per user, as in
Nova). An instance keeps a copy of the key pair it was built with (as Nova's instance keeps
``key_data``: deleting the key pair later changes no server) and its ``user_data`` (the
base64 text as given), which the daemon passes to Ironic in the config drive; ``config_drive``
says whether it was built with one. Expand only: a new table, nullable columns (rows before
have none).
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "key_pairs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_key_pairs"),
        sa.UniqueConstraint("user_id", "name", name="uq_key_pairs_user_id_name"),
    )
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.add_column(sa.Column("key_name", sa.String(255), nullable=True))
        batch.add_column(sa.Column("key_type", sa.String(16), nullable=True))
        batch.add_column(sa.Column("key_data", sa.Text(), nullable=True))
        batch.add_column(sa.Column("user_data", sa.Text(), nullable=True))
        batch.add_column(sa.Column("config_drive", sa.Boolean(), nullable=True))


def downgrade() -> None:
    # In place (as 0004): copying instances would have to leave out its generated column.
    with op.batch_alter_table("instances", recreate="never") as batch:
        for column in ("config_drive", "user_data", "key_data", "key_type", "key_name"):
            batch.drop_column(column)
    op.drop_table("key_pairs")
