"""Where Spark's checkpoint folders are read, and which folders are followed.

``CheckpointStorage`` reads files of checkpoint folders: ``adapters.checkpoints.
fsspec_storage`` (local and mounted folders, S3 and S3-compatible stores) is the real
one, ``testing.InMemoryCheckpointStorage`` the double. ``FollowedFolders`` keeps which
folders are followed into which group: ``adapters.sql.followed_folders`` (the service's
database) and ``testing.InMemoryFollowedFolders``.

Contract of ``CheckpointStorage`` (blocking; called from worker threads)
  - Paths are the folder's URL joined with ``/`` (``s3://bucket/ckpt/offsets/7``).
  - ``read_text`` returns None for a file that does not exist; ``batch_ids`` returns []
    for a folder that does not exist.
  - Anything else that goes wrong raises ``CheckpointReadError`` with a ``reason``:
    foreign errors (``OSError``, botocore's, ...) are mapped in the adapter, nowhere else.
  - ``requests`` counts the calls made to the storage (a listing, a read, an existence
    check: one each), for the cost of following many folders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class CheckpointStorage(Protocol):
    requests: int

    def read_text(self, path: str) -> str | None: ...

    def exists(self, path: str) -> bool: ...

    def batch_ids(self, directory: str) -> list[int]:
        """The batch ids of ``directory``'s files named by a batch id (any order)."""
        ...


@dataclass(frozen=True)
class FollowedFolder:
    """A checkpoint folder followed into ``group_id``. ``topics``: the topic patterns
    the registering token may commit (None: any), checked on every batch as for events."""

    path: str
    group_id: str
    topics: tuple[str, ...] | None = None
    registered_by: str | None = None
    cluster: str | None = None  # the Kafka cluster its registration named (None: none)


class FollowedFolders(Protocol):
    """Durable: a folder registered once is followed across restarts, by one replica."""

    def list(self) -> Sequence[FollowedFolder]: ...

    def add(self, folder: FollowedFolder) -> FollowedFolder | None:
        """Register ``folder``; returns the folder already registered at that path (then
        nothing changes), or None."""
        ...

    def remove(self, path: str) -> bool: ...
