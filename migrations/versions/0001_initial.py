"""initial: queries, pending checkpoints, consumer groups

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queries",
        sa.Column("query_id", sa.String(200), primary_key=True),
        sa.Column("group_id", sa.String(255), nullable=False, unique=True),
        sa.Column("registered_at", sa.Float, nullable=False),
        sa.Column("last_completed_id", sa.BigInteger, nullable=True),
        sa.Column("last_run_id", sa.String(200), nullable=True),
    )
    op.create_table(
        "pending_checkpoints",
        sa.Column(
            "query_id",
            sa.String(200),
            sa.ForeignKey("queries.query_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("checkpoint_id", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.String(200), nullable=True),
        sa.Column("offsets", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("query_id", "checkpoint_id"),
    )
    op.create_table(
        "consumer_groups",
        sa.Column("group_id", sa.String(255), primary_key=True),
        sa.Column("rewind_allowed", sa.Boolean, nullable=False),
        sa.Column("slot_query_id", sa.String(200), nullable=True),
        sa.Column("slot_checkpoint_id", sa.BigInteger, nullable=True),
        sa.Column("slot_run_id", sa.String(200), nullable=True),
        sa.Column("slot_offsets", sa.Text, nullable=True),
        sa.Column("slot_completed_at", sa.Float, nullable=True),
        sa.Column("committed_query_id", sa.String(200), nullable=True),
        sa.Column("committed_checkpoint_id", sa.BigInteger, nullable=True),
        sa.Column("committed_offsets", sa.Text, nullable=True),
        sa.Column("committed_at", sa.Float, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("consumer_groups")
    op.drop_table("pending_checkpoints")
    op.drop_table("queries")
