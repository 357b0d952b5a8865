"""compute API: flavors, extra specs, quota limits; instances' project, user, name, metadata

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

The tables of the compute API (issue 15): ``flavors``, ``flavor_extra_specs`` (removed with
their flavor), ``quota_limits`` (a project's own limits). ``instances`` gains what the API shows
of a server: ``project_id`` and ``user_id`` (rows made before this revision were the built-in
project's and user's, ``computed``, and are filled in as such), ``name``, ``user_metadata`` and
``flavor`` (JSON), and an index on ``project_id`` (every list is per project).

Batch mode as in 0003, but in place both ways: the downgrade needs sqlite >= 3.35 (``DROP
COLUMN``), because a copy of ``instances`` cannot carry its generated column over.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# The project and user of every instance made before the API existed (computed.instances.
# scheduler.DEFAULT_PROJECT / DEFAULT_USER when this revision was written).
BUILT_IN = "computed"


def upgrade() -> None:
    op.create_table(
        "flavors",
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("vcpus", sa.Integer(), nullable=False),
        sa.Column("ram", sa.Integer(), nullable=False),
        sa.Column("disk", sa.Integer(), nullable=False),
        sa.Column("ephemeral", sa.Integer(), nullable=False),
        sa.Column("swap", sa.Integer(), nullable=False),
        sa.Column("is_public", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_flavors"),
        sa.UniqueConstraint("name", name="uq_flavors_name"),
    )
    op.create_table(
        "flavor_extra_specs",
        sa.Column("flavor_id", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("flavor_id", "key", name="pk_flavor_extra_specs"),
        sa.ForeignKeyConstraint(["flavor_id"], ["flavors.id"], ondelete="CASCADE",
                                name="fk_flavor_extra_specs_flavor_id_flavors"),
    )
    op.create_table(
        "quota_limits",
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("resource", sa.String(255), nullable=False),
        sa.Column("hard_limit", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "resource", name="pk_quota_limits"),
    )
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.add_column(sa.Column("project_id", sa.String(255), nullable=True))
        batch.add_column(sa.Column("user_id", sa.String(255), nullable=True))
        batch.add_column(sa.Column("name", sa.String(255), nullable=True))
        batch.add_column(sa.Column("user_metadata", sa.Text(), nullable=True))
        batch.add_column(sa.Column("flavor", sa.Text(), nullable=True))
    op.execute(sa.text("UPDATE instances SET project_id = :p, user_id = :p")
               .bindparams(p=BUILT_IN))
    op.create_index("ix_instances_project_id", "instances", ["project_id"])


def downgrade() -> None:
    op.drop_index("ix_instances_project_id", table_name="instances")
    # In place everywhere (sqlite >= 3.35 drops columns): copying instances would have to
    # leave out its generated column, which sqlite refuses to insert into.
    with op.batch_alter_table("instances", recreate="never") as batch:
        for column in ("flavor", "user_metadata", "name", "user_id", "project_id"):
            batch.drop_column(column)
    op.drop_table("quota_limits")
    op.drop_table("flavor_extra_specs")
    op.drop_table("flavors")
