"""drop migration 0008's paired watchers' columns (the contract step)

The paired watchers went in 0.2.0, which neither reads nor writes ``replicas.watcher_*``
(its lease renewal names ``replica_id``, ``started_at`` and ``expires_at`` only): its
replicas keep serving beside 0.3.0 on this schema. 0.1.0's renewal read them: its replicas
must all be gone (upgraded to 0.2.0) before 0.3.0 starts (docs/run/upgrade.md).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
serves = "0008"  # 0.2.0's head: its replicas run on this schema (migrate.MARKER_TABLE)

COLUMNS = (
    ("watcher_id", sa.String(200)),
    ("watcher_url", sa.String(2048)),
    ("watcher_expires_at", sa.Float),
)


def upgrade() -> None:
    with op.batch_alter_table("replicas") as batch:
        for name, _kind in COLUMNS:
            batch.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table("replicas") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
