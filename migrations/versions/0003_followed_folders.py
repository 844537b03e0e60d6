"""followed checkpoint folders: Spark jobs committed without a listener

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "followed_folders",
        sa.Column("path", sa.String(2048), primary_key=True),
        sa.Column("group_id", sa.String(255), nullable=False),
        sa.Column("topics", sa.Text, nullable=True),
        sa.Column("registered_by", sa.String(200), nullable=True),
        sa.Column("registered_at", sa.Float, nullable=False),
    )
    op.create_index("ix_followed_folders_group_id", "followed_folders", ["group_id"])


def downgrade() -> None:
    op.drop_index("ix_followed_folders_group_id", "followed_folders")
    op.drop_table("followed_folders")
