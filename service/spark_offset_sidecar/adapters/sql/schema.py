"""The tables, as SQLAlchemy Core metadata. Alembic migrations in ``migrations/`` create
them; ``tests/adapters/test_migrations.py`` checks the two agree.

  queries              one row per query; ``group_id`` UNIQUE: a group has one query (R1)
  pending_checkpoints  snapshots not yet completed, per query (deleted with the query)
  consumer_groups      one row per group: the slot (completed, not known committed), the
                       last committed offsets, the operator's rewind permission, and with
                       replicas its lease: owner, owner epoch, lease expiry (``leases``)
  replicas             with replicas: one row per live replica and its lease expiry
  followed_folders     Spark checkpoint folders followed into a group (no listener)
  group_reports        with replicas: each group's status, live commits and status window
                       as its owner last published them (``ports.status_board``)

Offsets are stored as Spark-shaped JSON text: ``{"topic": {"0": 42}}``. On PostgreSQL,
``consumer_groups`` pages are filled to ``GROUP_ROWS_FILLFACTOR`` percent (migration 0007;
SQLAlchemy 2.0's metadata cannot say it; docs/decisions.md, "consumer_groups pages half
full").
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

metadata = MetaData()
GROUP_ROWS_FILLFACTOR = 50  # percent: at 10,000 groups, 100 % of renewals heap-only

queries = Table(
    "queries",
    metadata,
    Column("query_id", String(200), primary_key=True),
    Column("group_id", String(255), nullable=False, unique=True),
    Column("registered_at", Float, nullable=False),
    Column("last_completed_id", BigInteger, nullable=True),
    Column("last_run_id", String(200), nullable=True),
)

pending_checkpoints = Table(
    "pending_checkpoints",
    metadata,
    Column(
        "query_id",
        String(200),
        ForeignKey("queries.query_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("checkpoint_id", BigInteger, nullable=False),
    Column("run_id", String(200), nullable=True),
    Column("offsets", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    PrimaryKeyConstraint("query_id", "checkpoint_id"),
)

consumer_groups = Table(
    "consumer_groups",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("rewind_allowed", Boolean, nullable=False, default=False),
    Column("commit_interval_seconds", Float, nullable=True),  # None: the service's default
    Column("cluster", String(40), nullable=True),  # its Kafka cluster; None: the default one
    Column("slot_query_id", String(200), nullable=True),
    Column("slot_checkpoint_id", BigInteger, nullable=True),
    Column("slot_run_id", String(200), nullable=True),
    Column("slot_offsets", Text, nullable=True),
    Column("slot_completed_at", Float, nullable=True),
    Column("committed_query_id", String(200), nullable=True),
    Column("committed_checkpoint_id", BigInteger, nullable=True),
    Column("committed_offsets", Text, nullable=True),
    Column("committed_at", Float, nullable=True),
    Column("owner_id", String(200), nullable=True, index=True),
    Column("owner_epoch", BigInteger, nullable=False, server_default="0"),
    Column("owner_expires_at", Float, nullable=True),
)

replicas = Table(
    "replicas",
    metadata,
    Column("replica_id", String(200), primary_key=True),
    Column("started_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

followed_folders = Table(
    "followed_folders",
    metadata,
    Column("path", String(2048), primary_key=True),
    Column("group_id", String(255), nullable=False, index=True),
    Column("topics", Text, nullable=True),  # JSON list of patterns; NULL: any topic
    Column("cluster", String(40), nullable=True),  # the cluster named; NULL: the group's
    Column("registered_by", String(200), nullable=True),
    Column("registered_at", Float, nullable=False),
)

group_reports = Table(
    "group_reports",
    metadata,
    Column(
        "group_id",
        String(255),
        ForeignKey("consumer_groups.group_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("reported_by", String(200), nullable=False),
    Column("evaluated_at", Float, nullable=False),
    Column("status", String(10), nullable=False),
    Column("report", Text, nullable=False),  # JSON: adapters.sql.status_board
    Column("status_window", Text, nullable=False),  # JSON: the samples and lagging_since
)
