"""replica leases: who commits each group, for several replicas on one PostgreSQL

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("replica_id", sa.String(200), primary_key=True),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    with op.batch_alter_table("consumer_groups") as table:
        table.add_column(sa.Column("owner_id", sa.String(200), nullable=True))
        table.add_column(
            sa.Column("owner_epoch", sa.BigInteger, nullable=False, server_default="0")
        )
        table.add_column(sa.Column("owner_expires_at", sa.Float, nullable=True))
        table.create_index("ix_consumer_groups_owner_id", ["owner_id"])


def downgrade() -> None:
    with op.batch_alter_table("consumer_groups") as table:
        table.drop_index("ix_consumer_groups_owner_id")
        table.drop_column("owner_expires_at")
        table.drop_column("owner_epoch")
        table.drop_column("owner_id")
    op.drop_table("replicas")
