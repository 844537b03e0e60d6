"""several Kafka clusters: a consumer group's cluster (ledger R14), and the cluster a
followed folder's registration named

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: the service's default cluster (SIDECAR_KAFKA_CLUSTER_NAME), as every group
    # registered before this revision.
    op.add_column("consumer_groups", sa.Column("cluster", sa.String(40), nullable=True))
    op.add_column("followed_folders", sa.Column("cluster", sa.String(40), nullable=True))


def downgrade() -> None:
    op.drop_column("followed_folders", "cluster")
    op.drop_column("consumer_groups", "cluster")
