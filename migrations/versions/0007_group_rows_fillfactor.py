"""room on each page of consumer_groups for a new version of its rows (PostgreSQL)

A group's row (~1 KB at 32 partitions) is rewritten by every event batch that writes the
group and, with replicas, by every lease renewal (each group every few seconds). With pages
filled to the brim, each new version went to another page: a new entry in each index, and
a table that grew faster than autovacuum could clean (94 -> 246 MB in a minute of
renewals at 10,000 groups). Half-full pages keep each new version beside the old one (a
heap-only update: no index entry, the old version pruned on the page itself).

Taking a SHARE UPDATE EXCLUSIVE lock, it does not stop replicas that are running. Pages
already full take it as their rows move (every renewal moves them): ``VACUUM FULL
consumer_groups`` applies it at once, holding the table meanwhile.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE consumer_groups SET (fillfactor = 50)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE consumer_groups RESET (fillfactor)")
