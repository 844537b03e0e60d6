"""The ports of replicas (rules L1-L5 in ``core.ledger.leases``): the leases of groups in a
shared database, and the notices by which replicas hear which groups another one changed.

The real ones are PostgreSQL's (``adapters.sql.lease_store``,
``adapters.sql.change_notices``); the lease keeper (``runtime.lease_keeper``) sees only
these protocols.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Renewal:
    held: dict[str, int]  # group -> owner epoch, everything this replica owns now
    groups: int  # groups in the database
    replicas: int  # live replicas, this one included


class Leases(Protocol):
    """The leases of one replica. Each method is one short transaction and blocks (the
    keeper calls them from a thread)."""

    @property
    def replica_id(self) -> str: ...

    def renew(self) -> Renewal:
        """Extend this replica's lease and those of its groups (L1)."""

    def claim(self, limit: int) -> dict[str, int]:
        """Take up to ``limit`` free or expired groups (L1, L2): group -> new epoch."""

    def release(self, group_ids: Collection[str]) -> None:
        """Hand back these groups now."""

    def leave(self) -> None:
        """Hand back every group and this replica's own lease."""


@dataclass(frozen=True)
class ChangeNotice:
    """A batch another replica (or this one) wrote: which groups changed, which are new."""

    sender: str  # the replica id that wrote it
    changed: tuple[str, ...]
    new: tuple[str, ...]


class ChangeNotices(Protocol):
    async def follow(
        self,
        on_connected: Callable[[], Awaitable[None]],
        on_notice: Callable[[ChangeNotice], None],
    ) -> None:
        """Run until cancelled: on every (re)connection await ``on_connected`` (notices
        may have been missed while away), then call ``on_notice`` for each notice.
        Reconnects with backoff on its own; never raises but ``CancelledError``."""
