"""The watcher as the process taking events reaches it (``topology``): the readers'
requests it answers, its share of ``/metrics``, and what only this process's memory knows
of the groups (``MemoryUpdate``).

``WatcherLink`` is what the process taking events asks of it, ``Watcher`` that and its
lifecycle; ``adapters.watcher.child.WatcherChild`` is the real one (a child process asked
over its channel), ``testing.InMemoryWatcher`` a double of the link, and
``tests.support.watcher.LoopWatcher`` the watcher's own app in the tests' event loop.

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
    watcher refuses what it is told but a whole message until it took one, and the
    teller's next message is whole.
  - ``problem`` says why the watcher does not answer now, or None.
  - ``start`` starts it (briefed); ``first_ready`` waits until it answers ready (True) or
    has ended (False), the caller bounding the wait; ``run`` keeps it running until
    cancelled; ``stop`` ends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from spark_offset_sidecar.core.lag.group_memory import GroupMemory
from spark_offset_sidecar.core.lag.report import FolderReport

WATCHED_METRICS = "/metrics/watched"  # the watcher's share of /metrics, without its own series
MEMORY_UPDATES = "/memory/told"  # where a child watcher takes them (on its channel)
# A request to the watcher: method, path (percent-encoded, as it came), query, headers, body.
ChannelRequest = tuple[str, str, str, Mapping[str, str], bytes]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class MemoryUpdate:
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
    # another replica); its watcher publishes its groups' reports as that replica.
    replica: str | None = None
    # Its events' outcomes of no known group, whole (None: unchanged since last told).
    unattributed: Mapping[str, int] | None = None


class WatcherLink(Protocol):
    async def tell(self, update: MemoryUpdate) -> None: ...

    @property
    def generation(self) -> int: ...

    @property
    def problem(self) -> str | None: ...

    async def get(self, path: str, query: str, headers: Mapping[str, str]) -> Answer: ...

    async def share(self) -> bytes: ...


class Watcher(WatcherLink, Protocol):
    async def start(self) -> None: ...

    async def first_ready(self) -> bool: ...

    async def run(self) -> None: ...

    async def stop(self) -> None: ...
