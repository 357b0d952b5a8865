"""epoch columns named for what they hold

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

``providers.epoch`` -> ``providers.claim_epoch`` (the creation zxid of the node's claim znode,
the fencing token of the last applied report) and ``instances.epoch`` ->
``instances.member_epoch`` (the zxid of the managing daemon's membership znode). Values, types,
nullability and column order are kept; only the names change.

Batch mode so that one script serves every backend: PostgreSQL and MySQL/MariaDB rename in
place (``ALTER TABLE ... RENAME`` / ``CHANGE``, which is why the existing type and nullability
are given), sqlite copies the table.
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# (table, old name, new name, nullable) of each renamed column; all are BIGINT.
RENAMES = (
    ("providers", "epoch", "claim_epoch", False),
    ("instances", "epoch", "member_epoch", True),
)


def _rename(table: str, old: str, new: str, nullable: bool) -> None:
    with op.batch_alter_table(table, recreate="never") as batch:
        batch.alter_column(old, new_column_name=new, existing_type=sa.BigInteger(),
                           existing_nullable=nullable)


def upgrade() -> None:
    for table, old, new, nullable in RENAMES:
        _rename(table, old, new, nullable)


def downgrade() -> None:
    for table, old, new, nullable in RENAMES:
        _rename(table, new, old, nullable)
