"""The watcher as the process taking events reaches it when it started it
(``SIDECAR_WATCHER=child``): the readers' requests it answers, and its share of
``/metrics``, and what only this process's memory knows of the groups (``Told``).

``WatcherLink`` is the port; ``adapters.watcher.child.WatcherChild`` is the real one (a
child process on a Unix socket of its own). ``ToldLink`` is its part that tells: all
the process has of a watcher run on its own beside it (``SIDECAR_WATCHER=separate`` with
``SIDECAR_WATCHER_URL``: ``adapters.watcher.remote.WatcherAt``), whose readers ask it
directly.

Contract
  - ``get`` answers a GET of ``path`` (and ``query``) with ``headers`` passed on (the
    caller's token among them: the watcher checks it as the service would), as the
    watcher answered it; raises ``WatcherUnavailable`` when the watcher does not answer
    (starting, or started again after it died).
  - ``share`` returns the watcher's share of ``/metrics`` (``WATCHED_METRICS``) as it
    sent it, gzip-compressed; raises ``WatcherUnavailable`` as ``get`` does.
  - ``tell`` hands the watcher what this process's memory knows of some groups (and,
    with replicas, which replica this is and which groups it commits); raises
    ``WatcherUnavailable`` as ``get`` does (then nothing of it was taken).
  - ``generation`` counts the watchers started: a new one was told nothing yet. A
    watcher refuses what it is told but a whole message until it took one (one started
    again where ``generation`` cannot see it: a separate watcher), and the teller's next
    message is whole.
  - ``problem`` says why the watcher does not answer now, or None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from spark_offset_sidecar.core.lag.group_memory import GroupMemory
from spark_offset_sidecar.core.lag.report import FolderReport

WATCHED_METRICS = "/metrics/watched"  # the watcher's share of /metrics, without its own series
TOLD_MEMORY = "/memory/told"  # where a child watcher is told (on its socket only)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Told:
    """What the process taking events tells its watcher at once."""

    # Each group's memory (None: the group is gone from the ledger).
    groups: Mapping[str, GroupMemory | None]
    # The followed folders' reports by group, whole (None: unchanged since last told).
    folders: Mapping[str, tuple[FolderReport, ...]] | None = None
    whole: bool = False  # every group is in ``groups``: forget any other
    # Its own identity problems (Kafka tokens, the jobs' issuer), whole (None: unchanged).
    problems: tuple[str, ...] | None = None
    # With replicas: the groups the teller commits now (its leases), whole; its watcher
    # evaluates and publishes those only. None: unchanged, or not replicated (every group).
    owned: frozenset[str] | None = None
    # With replicas: the teller's replica id, in every message (a replica started again is
    # another replica); its watcher publishes its groups' reports as that replica, and a
    # paired watcher takes messages from the replica it is paired with only.
    replica: str | None = None


class ToldLink(Protocol):
    async def tell(self, told: Told) -> None: ...

    @property
    def generation(self) -> int: ...

    @property
    def problem(self) -> str | None: ...


class WatcherLink(ToldLink, Protocol):
    async def get(self, path: str, query: str, headers: Mapping[str, str]) -> Answer: ...

    async def share(self) -> bytes: ...


class WatcherPairing(Protocol):
    """A watcher run on its own paired with one replica (``SIDECAR_WATCHER_ADVERTISED_URL``;
    the replica reads the pairing with its lease and tells that watcher). The real one is
    PostgreSQL's (``adapters.sql.watcher_pairs``). Each method is one short transaction
    and blocks (call it from a thread).

    Contract
      - ``pair`` renews this watcher's claim on its replica while that replica's lease is
        live, else claims a live replica whose watcher's claim is not (the oldest
        first), and returns the replica's id; None when every live replica has a live
        watcher. No two watchers hold live claims on one replica.
      - A claim lives ``lease`` seconds from its last ``pair``; ``leave`` ends it now, and
        so does a ``pair`` that finds its replica's lease lapsed.
    """

    def pair(self) -> str | None: ...

    def leave(self) -> None: ...
