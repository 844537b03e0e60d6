"""Which groups this replica may commit: its leases as the database granted them.

Times are this replica's monotonic clock, passed in; the database side is
``adapters.sql.lease_store``, the loop that drives both ``runtime.lease_keeper``.

Rules
  L1 lease     A group's row carries its owner and the owner's lease expiry, by the
               database's clock. The owner renews every ``lease / 6``; once expired, any
               replica may claim it (``SELECT ... FOR UPDATE SKIP LOCKED``), and a renewal
               that loses the race for the row lock does not get it back.
  L2 epoch     Each claim increments the group's owner epoch. A commit is taken under an
               epoch, and its success is recorded only if the group still has this owner
               and epoch, checked in the transaction that records it (the fence).
  L3 deadline  Kafka cannot check our epochs (generation -1 commits), so on Kafka the fence
               is time: a replica starts a commit only before
               ``renewed + lease - 2 * commit_timeout``, ``renewed`` being when its last
               successful renewal *began*. The database set the expiry to at least
               ``renewed + lease``, so the replica's last commit has ended (one
               ``commit_timeout``) and one abandoned in its connection has been applied
               (a second one, of margin) before another replica can claim the group.
  L4 share     A replica claims free groups up to its fair share ``ceil(groups / live
               replicas)`` and releases groups with no commit in flight above it, so groups
               spread over the replicas and some move to one that joins.
  L5 refresh   A claimed group may be committed only once memory holds its stored state
               (ledger R11): never from what memory had before the claim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Ownership:
    replica_id: str
    lease: float
    commit_timeout: float
    epochs: dict[str, int] = field(default_factory=dict)  # group -> owner epoch held
    renewed: float | None = None  # monotonic start of the last successful renewal

    def __post_init__(self) -> None:
        if self.lease <= 2 * self.commit_timeout:
            raise ValueError("a lease must be longer than two commit timeouts (L3)")

    @property
    def commit_deadline(self) -> float | None:
        """L3: no commit starts at or after this time (None: holds no lease)."""
        if self.renewed is None:
            return None
        return self.renewed + self.lease - 2 * self.commit_timeout

    def leased(self, now: float) -> bool:
        """L3: whether a commit may start at ``now``."""
        deadline = self.commit_deadline
        return deadline is not None and now < deadline

    def epoch_for_commit(self, group_id: str, now: float) -> int | None:
        """The epoch to take ``group_id``'s commit under, or None: not ours to commit now."""
        return self.epochs.get(group_id) if self.leased(now) else None

    def renewed_at(self, started: float, held: Mapping[str, int]) -> None:
        """A renewal that began at ``started`` succeeded; ``held`` is what we own now
        (L5: only groups whose stored state memory already took in)."""
        self.renewed = started
        self.epochs = dict(held)

    def owns(self, group_id: str) -> bool:
        return group_id in self.epochs


def fair_share(groups: int, replicas: int) -> int:
    return math.ceil(groups / max(1, replicas))


def claim_count(owned: int, groups: int, replicas: int) -> int:
    """L4: how many free groups to claim."""
    return max(0, fair_share(groups, replicas) - owned)


def release_count(owned: int, groups: int, replicas: int) -> int:
    """L4: how many groups to let go of."""
    return max(0, owned - fair_share(groups, replicas))
