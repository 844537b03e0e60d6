"""The ledger as the store holds it, for the watcher (docs/decisions.md, "The watcher
follows the store"): each step reads every row's mark (``ports.store.LedgerRows``) and
reads again only the rows whose marks are new, changed or gone (ledger R11).

Invariants
  - After a step, memory holds every query and group as the store held it at some moment
    of the step's reads; the marks kept are those read, so a row that changed during the
    reads is read again at the next step.
  - A query that appears, moves or goes has its groups (before and after) read again.
  - The store is read on a worker thread; the ledger changes on the event loop, in one
    step with no await inside.
  - Memory's own figures (counters, a commit in flight, failures) are not in the store:
    they stay, or are as told (``runtime.watcher_memory``, via ``refreshed``).
  - ``wanted`` (a replica's watcher: its replica's groups; None: all) narrows memory to
    those groups and their queries: one newly wanted is read as new, one no longer
    wanted leaves as gone, and no other row is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.errors import StoreError
from spark_offset_sidecar.ports.store import LedgerRows, LoadedRows, StoredMarks, StoredState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FollowStep:
    """What one step read: every mark, and the rows of what changed (None: nothing)."""

    marks: StoredMarks
    loaded: LoadedRows | None


class StoreFollower:
    def __init__(
        self,
        rows: LedgerRows,
        ledger: Ledger,
        *,
        interval: float,
        refreshed: Callable[[Collection[str]], None] = lambda _group_ids: None,
        wanted: Callable[[], Collection[str] | None] = lambda: None,
    ) -> None:
        self.rows = rows
        self.wanted = wanted
        self.ledger = ledger
        self.interval = interval
        self.refreshed = refreshed
        self.marks = StoredMarks({}, {})
        self.steps = 0  # completed steps: the first one loads everything
        self.reread = 0  # rows of queries and groups read again, over every step
        self._woken = asyncio.Event()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="store-follower")

    def read(self) -> FollowStep:
        """The store's marks, and the rows whose marks differ from those of the last step
        (on the worker thread: touches no memory but the last step's marks)."""
        wanted = self.wanted()  # once a step: the step reads one set of groups
        marks = _only(self.rows.marks(), wanted)
        before = self.marks
        query_ids = _differing(before.queries, marks.queries)
        group_ids = _differing(before.groups, marks.groups)
        for query_id in query_ids:  # its group before and after
            for side in (before.queries, marks.queries):
                if (mark := side.get(query_id)) is not None:
                    group_ids.add(mark[0])
        if not query_ids and not group_ids:
            return FollowStep(marks, None)
        if wanted is None:
            return FollowStep(marks, self.rows.rows(query_ids, group_ids))
        # Rows still stored but no longer wanted are not read: memory lets them go.
        loaded = self.rows.rows(query_ids & marks.queries.keys(), group_ids & marks.groups.keys())
        stored = loaded.stored
        return FollowStep(
            marks,
            LoadedRows(
                loaded.query_ids | query_ids,
                loaded.group_ids | group_ids,
                StoredState(
                    [q for q in stored.queries if q.group_id in wanted],
                    [g for g in stored.groups if g.group_id in wanted],
                ),
            ),
        )

    def apply(self, step: FollowStep) -> None:
        """Memory takes in what ``step`` read (on the event loop)."""
        if step.loaded is not None:
            loaded = step.loaded
            self.ledger.refresh(
                loaded.query_ids, loaded.group_ids, loaded.stored.queries, loaded.stored.groups
            )
            self.refreshed(loaded.group_ids)
            self.reread += len(loaded.query_ids) + len(loaded.group_ids)
        self.marks = step.marks
        self.steps += 1

    async def step(self) -> None:
        self.apply(await asyncio.get_running_loop().run_in_executor(self._worker, self.read))

    async def run(self) -> None:
        """A step every ``interval`` seconds, or sooner when woken; a store that cannot be
        read is tried again at the next step (memory keeps what it had)."""
        while True:
            self._woken.clear()  # a wake during the step asks for the store after it
            try:
                await self.step()
            except StoreError as exc:
                log.warning("cannot follow the store (retrying): %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.interval)

    def wake(self) -> None:
        """Step now (or right after the step under way): the store holds something new."""
        self._woken.set()

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)


def _only(marks: StoredMarks, wanted: Collection[str] | None) -> StoredMarks:
    """The marks of ``wanted`` groups and of their queries (None: all of them)."""
    if wanted is None:
        return marks
    return StoredMarks(
        {q: mark for q, mark in marks.queries.items() if mark[0] in wanted},
        {g: mark for g, mark in marks.groups.items() if g in wanted},
    )


def _differing(before: Mapping[str, Hashable], now: Mapping[str, Hashable]) -> set[str]:
    """Ids new, gone, or whose mark changed."""
    changed = {key for key, mark in now.items() if before.get(key) != mark}
    changed.update(key for key in before if key not in now)
    return changed
