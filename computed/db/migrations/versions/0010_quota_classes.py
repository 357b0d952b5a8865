"""quota classes, the cores and RAM of quota reservations

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

Issue 24: Nova's ``os-quota-class-sets`` (``quota_classes``: the ``default`` class's limits are
every project's defaults) and the ``cores``/``ram`` quotas, counted from the flavors of a
project's servers and of its builds admitted before their row exists (``quota_reservations``'
new ``cores`` and ``ram``). Expand only: a new table and nullable columns. Code before this
revision writes reservations without them (counted as 0 while both run: a build of old code
admitted at the same moment is not counted in cores and RAM until its row exists).
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quota_classes",
        sa.Column("class_name", sa.String(255), nullable=False),
        sa.Column("resource", sa.String(255), nullable=False),
        sa.Column("hard_limit", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("class_name", "resource", name="pk_quota_classes"),
    )
    with op.batch_alter_table("quota_reservations", recreate="never") as batch:
        batch.add_column(sa.Column("cores", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("ram", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("quota_reservations", recreate="never") as batch:
        batch.drop_column("ram")
        batch.drop_column("cores")
    op.drop_table("quota_classes")
