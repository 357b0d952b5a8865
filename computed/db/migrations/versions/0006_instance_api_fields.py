"""instances: description, access_ip_v4, access_ip_v6, reservation_id

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

Issue 24 item 8: what Nova's ``POST /servers`` takes and shows back (``description`` from
2.19, ``accessIPv4``/``accessIPv6``) was accepted and dropped; item 9: the reservation id of a
request creating several servers, which ``?reservation_id=`` finds. All nullable; rows before
have none.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances", recreate="never") as batch:
        batch.add_column(sa.Column("description", sa.String(255), nullable=True))
        batch.add_column(sa.Column("access_ip_v4", sa.String(45), nullable=True))
        batch.add_column(sa.Column("access_ip_v6", sa.String(45), nullable=True))
        batch.add_column(sa.Column("reservation_id", sa.String(36), nullable=True))
    op.create_index("ix_instances_reservation_id", "instances", ["reservation_id"])


def downgrade() -> None:
    op.drop_index("ix_instances_reservation_id", table_name="instances")
    # In place (as 0004): copying instances would have to leave out its generated column.
    with op.batch_alter_table("instances", recreate="never") as batch:
        for column in ("reservation_id", "access_ip_v6", "access_ip_v4", "description"):
            batch.drop_column(column)
