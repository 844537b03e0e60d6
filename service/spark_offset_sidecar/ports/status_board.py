"""Where replicas' owners publish what they alone know of their groups, and every replica
reads it (``core.lag.report``): the board that makes every replica answer every read
the same way, and hands status windows from an old owner to a new one.

The real one is PostgreSQL's (``adapters.sql.status_board``); ``testing.InMemoryStatusBoard``
is the double. Methods block (the service calls them from threads).

Contract
  - ``publish`` writes the entries of groups that ``replica_id`` owns (the store's lease
    says so at the time of writing) and skips the others: an owner that lost a group
    cannot overwrite its new owner's report.
  - ``read`` returns the newest published report of each group asked for (``None``: of
    every group) that has one; ``windows`` the windows published with them.
  - Failing methods raise ``StoreUnavailable``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from spark_offset_sidecar.core.lag.report import GroupReport
from spark_offset_sidecar.core.lag.status import StoredWindow


@dataclass(frozen=True)
class BoardEntry:
    report: GroupReport
    window: StoredWindow


class StatusBoard(Protocol):
    # The replica it publishes as; a replica's watcher sets it when told which replica it
    # watches for (and again when that replica is started again: a new replica id).
    replica_id: str

    def publish(self, entries: Sequence[BoardEntry]) -> int:
        """Write ``entries`` (one per group); returns how many were written."""

    def read(self, group_ids: Collection[str] | None = None) -> list[GroupReport]: ...

    def windows(self, group_ids: Collection[str]) -> dict[str, StoredWindow]: ...
