"""providers and instances

Revision ID: 0001
Revises:
Create Date: 2026-05-01

The first schema: ``providers`` (issue 5) and ``instances`` (issue 6), with
the one-live-instance-per-node rule as a unique stored generated column (see
:mod:`computed.db.models`). Written out rather than imported from the models,
so that later model changes do not rewrite history.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "providers",
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("uuid", name="pk_providers"),
    )
    op.create_table(
        "instances",
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("node_uuid", sa.String(36), nullable=True),
        sa.Column("live_node_uuid", sa.String(36),
                  sa.Computed("CASE WHEN state <> 'DELETED' THEN node_uuid END", persisted=True),
                  nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("resource_class", sa.String(255), nullable=False),
        sa.Column("traits", sa.Text(), nullable=False),
        sa.Column("image", sa.Text(), nullable=True),
        sa.Column("fault", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("uuid", name="pk_instances"),
        sa.UniqueConstraint("live_node_uuid", name="uq_instances_live_node_uuid"),
    )
    op.create_index("ix_instances_host", "instances", ["host"])


def downgrade() -> None:
    op.drop_index("ix_instances_host", table_name="instances")
    op.drop_table("instances")
    op.drop_table("providers")
