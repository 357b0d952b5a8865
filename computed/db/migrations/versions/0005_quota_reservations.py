"""quota_projects, quota_reservations: quota decisions one at a time per project

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

Issue 23 item 1: concurrent builds of one project could all pass the quota check and all stay
(ERROR servers were never rechecked). ``quota_projects`` holds one row per project, locked
while a build's quota decision is taken (``SELECT ... FOR UPDATE``; sqlite's write lock);
``quota_reservations`` records each build admitted before its instance row exists, so the next
decision counts it (see :func:`computed.db.quotas.reserve_quota`). Both start empty.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quota_projects",
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("project_id", name="pk_quota_projects"),
    )
    op.create_table(
        "quota_reservations",
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("resource_class", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("instance_uuid", name="pk_quota_reservations"),
    )
    op.create_index("ix_quota_reservations_project_id", "quota_reservations", ["project_id"])


def downgrade() -> None:
    op.drop_index("ix_quota_reservations_project_id", table_name="quota_reservations")
    op.drop_table("quota_reservations")
    op.drop_table("quota_projects")
