"""each replica's paired watcher: a watcher in a pod of its own pairs itself with a replica

A watcher run with ``SIDECAR_WATCHER_ADVERTISED_URL`` claims a live replica that has no
live watcher (``watcher_id``, ``watcher_url``, ``watcher_expires_at``) and renews the claim;
the replica reads its watcher's URL with its own lease renewal and tells it there
(``adapters.sql.watcher_pairs``). The columns are NULL for a replica with no watcher, and
on SQLite (no replicas) never written.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

COLUMNS = (
    ("watcher_id", sa.String(200)),
    ("watcher_url", sa.String(2048)),
    ("watcher_expires_at", sa.Float),
)


def upgrade() -> None:
    with op.batch_alter_table("replicas") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("replicas") as batch:
        for name, _kind in COLUMNS:
            batch.drop_column(name)
