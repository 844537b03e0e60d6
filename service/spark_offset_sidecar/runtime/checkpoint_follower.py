"""Follows Spark checkpoint folders and feeds them to the ledger (docs/attach/checkpoint-folder.md).

No new commit path: ``offsets/N`` becomes ``decide_snapshot(N)`` and ``commits/N``
``decide_complete(N)``, recorded through the same ``DurableLedger`` as HTTP events, so
every rule of the ledger holds; a listener and a follower of one query are duplicates.

Invariants
  - A folder's read position moves only after the ledger recorded what was read; a
    failed poll is retried whole at the next interval, after listing the folder again.
  - Every failed poll is counted by a reason of ``REASONS`` and logged with the folder.
  - With replicas, a folder is read by the replica that commits its group; a group
    nobody has state for yet by whichever polls first (the second is a duplicate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from spark_offset_sidecar.core.clusters import Clusters, UnknownCluster
from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.core.ledger.changes import Decision, Outcome
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.patterns import matches_any
from spark_offset_sidecar.core.spark.checkpoint_log import OffsetLogEntry
from spark_offset_sidecar.errors import (
    CheckpointFileMissing,
    CheckpointReadError,
    StoreError,
    UnreadableCheckpoint,
)
from spark_offset_sidecar.observe.logs import about
from spark_offset_sidecar.observe.metrics import FolderFigures
from spark_offset_sidecar.ports.checkpoints import (
    CheckpointStorage,
    FollowedFolder,
    FollowedFolders,
)
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.runtime.folder_reader import FolderNews, ReadPosition, read_news

log = logging.getLogger(__name__)

# Why a poll failed: the label set of ``sidecar_followed_folder_errors_total``.
REASONS = (
    "unreachable",  # the storage did not answer (network, server, timeout)
    "denied",  # the storage refused the credentials
    "unreadable_file",  # a file is not what Spark writes (half-written, garbage, ambiguous)
    "missing_file",  # commits/N without offsets/N, or a seen folder's metadata (none yet: waiting)
    "conflict",  # the ledger refused: the group belongs to another query (re-created?)
    "forbidden_topic",  # the registering token may not commit a topic the query reads
    "store_unavailable",  # the database could not take the write
    "refused",  # any other refusal of the ledger (named in the status)
    "internal_error",  # anything else (a bug, or storage options its client refused)
)
_RECORDED = frozenset({Outcome.ACCEPTED, Outcome.DUPLICATE, Outcome.STALE, Outcome.IGNORED})


class PollFailed(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass
class FolderState:
    """One followed folder as this replica sees it (read by the API and the metrics)."""

    folder: FollowedFolder
    position: ReadPosition = field(default_factory=ReadPosition)
    newest_in_folder: int | None = None  # the newest commits/N seen in the folder
    errors: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    behind_since: float | None = None  # monotonic: when a batch not yet recorded was seen
    polled_at: float | None = None  # wall clock of the last poll that succeeded
    polls: int = 0
    reading: asyncio.Future[FolderNews] | None = None  # the read under way, if any

    def behind_seconds(self, now: float) -> float:
        return 0.0 if self.behind_since is None else max(0.0, now - self.behind_since)

    def report(self, now: float) -> FolderReport:
        """This state as the API shows it, at monotonic ``now``."""
        return FolderReport(
            path=self.folder.path,
            query_id=self.position.query_id,
            newest_batch_in_folder=self.newest_in_folder,
            last_batch_recorded=self.position.completed,
            pending_batch=self.position.pending,
            behind_seconds=round(self.behind_seconds(now), 1),
            errors=tuple(sorted(self.errors.items())),
            last_error=self.last_error,
            last_poll_at=self.polled_at,
        )


class CheckpointFollower:
    def __init__(
        self,
        storage: CheckpointStorage,
        folders: FollowedFolders,
        durable: DurableLedger,
        *,
        interval: float,
        relist_every: int = 60,
        read_timeout: float = 30.0,
        concurrency: int = 8,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        clusters: Clusters | None = None,
    ) -> None:
        self.storage = storage
        self.clusters = clusters or Clusters()  # R14: the cluster of a folder's group
        self.folders = folders
        self.durable = durable
        self.interval = interval
        self.relist_every = relist_every
        # A read that does not return in time (a hung mount) fails its folder's poll; the
        # round goes on. Its thread cannot be stopped: the folder's next read waits for it
        # (one stuck thread a folder at most).
        self.read_timeout = read_timeout
        self.clock = clock  # the ledger's clock
        self.monotonic = monotonic
        self.states: dict[str, FolderState] = {}
        self._worker = ThreadPoolExecutor(concurrency, thread_name_prefix="checkpoint-reader")
        self._limit = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Poll now (a folder was registered)."""
        self._wake.set()

    def reports(self) -> dict[str, tuple[FolderReport, ...]]:
        """By group, how reading its folders goes here (those this replica reads now)."""
        ledger = self.durable.ledger
        now = self.monotonic()
        found: dict[str, list[FolderReport]] = {}
        for state in sorted(self.states.values(), key=lambda s: s.folder.path):
            group_id = state.folder.group_id
            if state.polls and _follows(ledger, group_id):
                found.setdefault(group_id, []).append(state.report(now))
        return {group_id: tuple(reports) for group_id, reports in found.items()}

    def figures(self) -> list[FolderFigures]:
        """The folders this replica reads, for the metrics (read at scrape time)."""
        now = self.monotonic()
        return [
            FolderFigures(
                s.folder.path,
                s.folder.group_id,
                s.newest_in_folder,
                s.position.completed,
                s.behind_seconds(now),
                s.errors,
                s.polls,
            )
            for s in self.states.values()
            if s.polls
        ]

    async def run(self) -> None:
        try:
            while True:
                self._wake.clear()
                try:
                    await self.poll_all()
                except Exception as exc:  # the registry is away: try again next interval
                    log.warning("could not read the followed folders: %s", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval)
        finally:
            self._worker.shutdown(wait=False, cancel_futures=True)

    async def poll_all(self) -> None:
        """One round: every followed folder of this replica, read and recorded."""
        loop = asyncio.get_running_loop()
        registered = await loop.run_in_executor(self._worker, self.folders.list)
        self._track(registered)
        ledger = self.durable.ledger
        mine = [s for s in self.states.values() if _follows(ledger, s.folder.group_id)]
        await asyncio.gather(*(self._poll(state) for state in mine))

    def _track(self, registered: Iterable[FollowedFolder]) -> None:
        current = {f.path: f for f in registered}
        for path in set(self.states) - set(current):
            del self.states[path]
        for path, folder in current.items():
            state = self.states.get(path)
            if state is None or state.folder != folder:  # new, or registered anew
                self.states[path] = FolderState(folder)

    async def _poll(self, state: FolderState) -> None:
        path = state.folder.path
        async with self._limit:
            try:
                await self._read_and_record(state)
            except CheckpointFileMissing as missing:
                if state.position.query_id is None and missing.path.endswith("/metadata"):
                    state.last_error = str(missing)  # registered before its job started
                else:
                    self._failed(state, missing.reason, str(missing))
            except (PollFailed, UnreadableCheckpoint, CheckpointReadError) as exc:
                self._failed(state, exc.reason, str(exc))
            except StoreError as exc:
                self._failed(state, "store_unavailable", f"{path}: {exc}")
            except Exception as exc:  # one folder's failure never stops the others' polls
                log.exception("checkpoint folder %s: unexpected error", path)
                self._failed(state, "internal_error", f"{path}: {type(exc).__name__}: {exc}")
            else:
                state.last_error = None
                state.polled_at = self.clock()
            state.polls += 1

    def _failed(self, state: FolderState, reason: str, detail: str) -> None:
        state.errors[reason] += 1
        state.position.polls_since_listing = self.relist_every  # list again next time
        if detail != state.last_error:  # once per new problem, not once per poll
            log.warning(
                "checkpoint folder %s: %s",
                state.folder.path,
                detail,
                extra=about(
                    folder=state.folder.path, group_id=state.folder.group_id, reason=reason
                ),
            )
        state.last_error = detail

    async def _read_and_record(self, state: FolderState) -> None:
        folder, position = state.folder, state.position
        if state.reading is not None and not state.reading.done():
            raise PollFailed(
                "unreachable", f"{folder.path}: the read before has not returned (hung storage?)"
            )
        state.reading = asyncio.get_running_loop().run_in_executor(
            self._worker,
            lambda: read_news(self.storage, folder.path, position, relist_every=self.relist_every),
        )
        try:
            async with asyncio.timeout(self.read_timeout):
                news = await asyncio.shield(state.reading)
        except TimeoutError:
            raise PollFailed(
                "unreachable", f"{folder.path}: no answer within {self.read_timeout:g} s"
            ) from None
        if news.query_changed:
            log.warning(
                "checkpoint folder %s was re-created: query %s is now %s; release %s "
                "(DELETE /v1/queries/%s) to let the new query commit to %s",
                folder.path,
                position.query_id,
                news.query_id,
                position.query_id,
                position.query_id,
                folder.group_id,
                extra=about(folder=folder.path, group_id=folder.group_id, query_id=news.query_id),
            )
            state.position = position = ReadPosition(query_id=news.query_id)
        position.query_id = news.query_id
        if news.listed:
            position.polls_since_listing = 0
        else:
            position.polls_since_listing += 1
        state.newest_in_folder = news.newest_committed
        if news.completed is not None:
            batch, entry = news.completed
            if position.completed is None or batch > position.completed:
                if state.behind_since is None:
                    state.behind_since = self.monotonic()
                await self._record(folder, news.query_id, batch, entry, complete=True)
                position.completed = batch
        state.behind_since = None
        if news.planned is not None:
            batch, entry = news.planned
            await self._record(folder, news.query_id, batch, entry, complete=False)
            position.pending = batch

    async def _record(
        self,
        folder: FollowedFolder,
        query_id: str,
        batch: int,
        entry: OffsetLogEntry,
        *,
        complete: bool,
    ) -> None:
        if not entry.offsets:
            return  # no Kafka source in this batch: nothing to commit
        topics = {tp.topic for tp in entry.offsets}
        if folder.topics is not None:
            refused = sorted(t for t in topics if not matches_any(t, folder.topics))
            if refused:
                raise PollFailed(
                    "forbidden_topic",
                    f"{folder.path}: the token that registered it ({folder.registered_by}) "
                    f"may not commit offsets of {refused}",
                )
        try:
            cluster = self.clusters.of(folder.group_id, folder.cluster)
        except UnknownCluster as exc:  # registered for a cluster the settings dropped since
            raise PollFailed("refused", f"{folder.path}: {exc}") from None
        now = self.clock()
        snapshot = await self.durable.record(
            lambda ledger: ledger.decide_snapshot(
                query_id, folder.group_id, batch, None, entry.offsets, now, cluster
            ),
            query_id=query_id,
            group_id=folder.group_id,
        )
        self._check(folder, snapshot)
        if complete:
            completion = await self.durable.record(
                lambda ledger: ledger.decide_complete(query_id, batch, now),
                query_id=query_id,
            )
            self._check(folder, completion)

    @staticmethod
    def _check(folder: FollowedFolder, decision: Decision) -> None:
        if decision.outcome in _RECORDED:
            return
        detail = f"{folder.path}: {decision.outcome.value}: {decision.detail}"
        if decision.outcome is not Outcome.CONFLICT:
            raise PollFailed("refused", detail)
        raise PollFailed(
            "conflict",
            f"{detail}. If this checkpoint was re-created, release the old query "
            "(DELETE /v1/queries/<old id>) and the new one commits from its next batch",
        )


def _follows(ledger: Ledger, group_id: str) -> bool:
    """This replica commits the group, or nobody has state for it yet (see module doc)."""
    return ledger.commits(group_id) or group_id not in ledger.groups
