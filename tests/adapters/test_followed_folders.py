"""``SqlFollowedFolders`` on SQLite and on a real PostgreSQL: registered folders survive
a new store object (a restart), one path is one registration."""

from __future__ import annotations

from spark_offset_sidecar.adapters.sql.followed_folders import SqlFollowedFolders
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.ports.checkpoints import FollowedFolder


def test_registrations_are_durable_and_unique_per_path(database_url: str) -> None:
    store = SqlStore(database_url)
    store.migrate()
    folders = SqlFollowedFolders(store.engine)
    first = FollowedFolder("s3://b/orders", "orders", ("orders-*",), "team-a", "eu-west")
    assert folders.add(first) is None
    assert folders.add(FollowedFolder("s3://b/orders", "other")) == first
    assert folders.add(FollowedFolder("/mnt/ckpt/payments", "payments")) is None
    store.close()

    again = SqlStore(database_url)
    registry = SqlFollowedFolders(again.engine)
    assert registry.list() == [
        FollowedFolder("/mnt/ckpt/payments", "payments"),
        first,
    ]
    assert registry.remove("s3://b/orders")
    assert not registry.remove("s3://b/orders")
    assert [f.path for f in registry.list()] == ["/mnt/ckpt/payments"]
    again.close()
