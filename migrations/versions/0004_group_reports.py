"""group reports: what owners publish so that every replica answers every read alike

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "group_reports",
        sa.Column(
            "group_id",
            sa.String(255),
            sa.ForeignKey("consumer_groups.group_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("reported_by", sa.String(200), nullable=False),
        sa.Column("evaluated_at", sa.Float, nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("report", sa.Text, nullable=False),
        sa.Column("status_window", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("group_reports")
