"""host aggregates

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

Issue 24: Nova's ``os-aggregates``, named groups of compute hosts (computed's daemons) with
metadata: ``aggregates``, ``aggregate_hosts`` (one row per daemon in an aggregate, so that two
requests adding hosts at once both land, and one adding a host already there is refused by the
key) and ``aggregate_metadata``. Expand only: new tables, which the previous release never reads.
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "aggregates",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_aggregates"),
        sa.UniqueConstraint("name", name="uq_aggregates_name"),
        sa.UniqueConstraint("uuid", name="uq_aggregates_uuid"),
    )
    for table, column in (("aggregate_hosts", "host"), ("aggregate_metadata", "key")):
        columns = [sa.Column("aggregate_id", sa.Integer(), nullable=False),
                   sa.Column(column, sa.String(255), nullable=False)]
        if table == "aggregate_metadata":
            columns.append(sa.Column("value", sa.String(255), nullable=False))
        op.create_table(
            table, *columns,
            sa.PrimaryKeyConstraint("aggregate_id", column, name=f"pk_{table}"),
            sa.ForeignKeyConstraint(["aggregate_id"], ["aggregates.id"], ondelete="CASCADE",
                                    name=f"fk_{table}_aggregate_id_aggregates"),
        )


def downgrade() -> None:
    op.drop_table("aggregate_metadata")
    op.drop_table("aggregate_hosts")
    op.drop_table("aggregates")
