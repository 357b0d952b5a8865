"""flavor access lists, server locks, server security groups

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

Issue 24: private flavors (Nova's os-flavor-access: a private flavor is visible to admins and to
the projects on its access list, ``flavor_projects``) and the lock of a server (Nova's
``locked_by``: ``owner`` or ``admin``; NULL: unlocked), and the security groups a server is
in (a JSON list of names; NULL: ``default``, what Nova's create answer says every server is
in). Expand only: a new table and nullable columns. Code before this revision makes only public
flavors, never locks and leaves servers in ``default``, so it reads and writes its rows as
before; a flavor made private by newer code is public to it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flavor_projects",
        sa.Column("flavor_id", sa.String(255), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("flavor_id", "project_id", name="pk_flavor_projects"),
        sa.ForeignKeyConstraint(["flavor_id"], ["flavors.id"], ondelete="CASCADE",
                                name="fk_flavor_projects_flavor_id_flavors"),
    )
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.add_column(sa.Column("locked_by", sa.String(16), nullable=True))
        batch.add_column(sa.Column("security_groups", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.drop_column("security_groups")
        batch.drop_column("locked_by")
    op.drop_table("flavor_projects")
