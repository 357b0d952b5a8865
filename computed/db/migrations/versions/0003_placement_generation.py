"""providers.placement_generation

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

``providers.placement_generation``: Placement's generation of the provider after computed's
last write to it, compared by the reporter's resync with the generation Placement lists
(issue 13 item 3). Nullable, no default: rows written before this revision hold NULL, "not
known", which the resync verifies once (see :mod:`computed.reporter.resync`).

Batch mode so that one script serves every backend: PostgreSQL and MySQL/MariaDB add and drop
the column in place; sqlite adds it in place and, on a version without ``DROP COLUMN``, copies
the table to drop it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("providers", recreate="never") as batch:
        batch.add_column(sa.Column("placement_generation", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("providers", recreate="auto") as batch:
        batch.drop_column("placement_generation")
