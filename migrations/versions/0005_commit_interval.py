"""a consumer group's own minimum commit interval (ledger R13)

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("consumer_groups", sa.Column("commit_interval_seconds", sa.Float, nullable=True))


def downgrade() -> None:
    op.drop_column("consumer_groups", "commit_interval_seconds")
