"""The lag monitor: every ``interval`` it reads the log ends and starts of every committed
partition, the timestamps the histories cannot place, and evaluates every group's status
(``core.lag.status``) and lag figures (``core.lag.figures``). The metrics,
``GET /v1/status`` and ``/ui`` read what it keeps.

Invariants
  - A failed read keeps the last known log ends and never stops the loop; a topic that
    cannot be read leaves its partitions unknown, not zero.
  - Only groups whose ``status_inputs`` changed, or with a lagging partition, are sampled
    and evaluated again; the others keep their status and figures (docs/decisions.md,
    "Only groups that can have changed are judged").
  - A record's timestamp is read from Kafka at most once per (partition, offset), in one
    call per read, on a loop of its own (``runtime.own_loop``); a failed call leaves
    those time lags unknown until the next.
  - A lost record is counted once per group: each (group, partition) remembers up to
    which offset its losses were counted.
  - Every pass over the groups takes turns (docs/decisions.md, "Long passes take turns").
  - With replicas (a ``board``): a group new here has its window seeded from the board
    before it is sampled, and after each evaluation this replica's changed reports and
    windows are published (a failed publication is retried at the next).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from spark_offset_sidecar.core.lag.figures import (
    GroupLag,
    GroupTrend,
    JobRates,
    PackedLags,
    TrendPoint,
    data_status,
    partition_lag,
)
from spark_offset_sidecar.core.lag.log_history import PartitionHistory
from spark_offset_sidecar.core.lag.report import (
    FolderReport,
    GroupReport,
    report_of,
)
from spark_offset_sidecar.core.lag.status import (
    CommitWindows,
    GroupStatus,
    StatusInputs,
    StoredWindow,
    status_inputs,
)
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import GroupState
from spark_offset_sidecar.core.offsets import OffsetMap, TopicPartition
from spark_offset_sidecar.errors import KafkaReadError, StoreError
from spark_offset_sidecar.ports.kafka import LogEndReader, RecordTimeReader
from spark_offset_sidecar.ports.status_board import BoardEntry, StatusBoard
from spark_offset_sidecar.turns import Turns

log = logging.getLogger(__name__)
# A published report without its times, and its window: unchanged, not written again.
_Content = tuple[GroupReport, StoredWindow]


@dataclass
class LagReadCounters:
    succeeded: int = 0
    failed: int = 0
    record_reads: int = 0  # calls that read record timestamps from Kafka
    record_partitions: int = 0  # partitions those calls asked for
    record_failures: int = 0


@dataclass(frozen=True)
class Evaluation:
    """The fleet's last evaluation as the lists read it (``rounds``: how many so far)."""

    rounds: int = 0
    statuses: Mapping[str, GroupStatus] = field(default_factory=dict)
    lags: Mapping[str, GroupLag] = field(default_factory=dict)
    evaluated_at: float | None = None
    read_at: float | None = None  # when the log ends it evaluated were read


@dataclass
class LagMonitor:
    ledger: Callable[[], Ledger]
    reader: LogEndReader
    interval: float
    err_after_failures: int
    windows: CommitWindows = field(default_factory=CommitWindows)
    clock: Callable[[], float] = time.time
    log_ends: dict[TopicPartition, int] = field(default_factory=dict)
    read_at: float | None = None  # when the log ends were last read successfully
    evaluated_at: float | None = None
    statuses: dict[str, GroupStatus] = field(default_factory=dict)
    # Why a group's commit in flight has no answer yet (``OffsetCommitter.waiting``).
    waits: Callable[[str], str | None] = lambda _group_id: None
    # With several Kafka clusters (``runtime.lag_monitors``): this monitor reads and
    # evaluates only the groups of ``cluster`` (R14; None: the default one).
    one_cluster: bool = False
    cluster: str | None = None
    counters: LagReadCounters = field(default_factory=LagReadCounters)
    evaluations: int = 0  # groups evaluated in all (the others kept their status)
    # Evaluations of the fleet completed. ``statuses`` and ``lags`` are replaced, never
    # changed in place (not even once replaced: readers hold them across their turns), and
    # only when it grows: what is derived from them holds until then.
    rounds: int = 0
    # By group, the evaluation (its number in ``rounds``) that last computed its status and
    # lag figures (a kept group keeps it): what is rendered from them holds while it stands.
    evaluated_in: dict[str, int] = field(default_factory=dict)
    _inputs: dict[str, StatusInputs] = field(default_factory=dict)  # as last evaluated
    board: StatusBoard | None = None  # with replicas: where reports are published
    # By group, how reading its followed folders goes here (published with its report).
    folders: Callable[[], Mapping[str, tuple[FolderReport, ...]]] = dict
    # What was last published per group (all but the times): unchanged ones are not
    # written again.
    _published: dict[str, _Content] = field(default_factory=dict)
    # Time lag and data at risk (core.lag.figures): None leaves time lags unknown.
    record_times: RecordTimeReader | None = None
    risk_seconds: float = 3600.0  # AT_RISK when records are deleted sooner than this
    log_starts: dict[TopicPartition, int] = field(default_factory=dict)
    histories: dict[TopicPartition, PartitionHistory] = field(default_factory=dict)
    lags: dict[str, GroupLag] = field(default_factory=dict)
    trends: dict[str, GroupTrend] = field(default_factory=dict)
    jobs: dict[str, JobRates] = field(default_factory=dict)  # by group: its last progress
    # Records counted lost, by group and topic, and up to which offset, by (group, tp).
    lost: dict[str, dict[str, int]] = field(default_factory=dict)
    _lost_upto: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    # Timestamps read from Kafka: (partition, offset) -> Unix time (None: no record there).
    _record_times: dict[tuple[TopicPartition, int], float | None] = field(default_factory=dict)
    # What the histories tell of (partition, offset), as of the last read.
    _placed: dict[tuple[TopicPartition, int], float | None] = field(default_factory=dict)
    _woken: asyncio.Event = field(default_factory=asyncio.Event)  # read now (``wake``)

    @property
    def max_gap(self) -> float:
        """The widest gap between two reads that a record's time is interpolated in."""
        return 1.5 * self.interval + 0.5

    def note_job(self, group_id: str, rates: JobRates) -> None:
        """What the group's job said of its pace in its last progress event."""
        self.jobs[group_id] = rates

    async def run(self) -> None:
        """A read every ``interval`` seconds, or sooner when woken."""
        while True:
            self._woken.clear()  # a wake during the read asks for one more after it
            try:
                await self.poll()
            except Exception:  # a bug here must not end the monitor, nor the service
                log.exception("the lag monitor's read failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.interval)

    def wake(self) -> None:
        """Read now (or right after the read under way): it has groups it has not read."""
        self._woken.set()

    def last_evaluation(self) -> Evaluation:
        return Evaluation(self.rounds, self.statuses, self.lags, self.evaluated_at, self.read_at)

    def publish_as(self, replica_id: str) -> None:
        """Publish as ``replica_id`` (as told: another once that replica started again)."""
        if self.board is not None and self.board.replica_id != replica_id:
            log.info("watching for replica %s", replica_id)
            self.board.replica_id = replica_id

    async def poll(self) -> None:
        ledger = self.ledger()
        committed = self._committed(ledger)
        wanted: set[TopicPartition] = set()
        turns = Turns()
        for offsets in committed:
            wanted.update(offsets)
            await turns.take()
        try:
            answer = await self.reader.log_ends(wanted)
        except KafkaReadError as exc:
            self.counters.failed += 1
            log.warning("reading log-end offsets failed (keeping the last known): %s", exc)
        else:
            self.counters.succeeded += 1
            if answer.failed_topics:
                log.warning(
                    "log-end offsets of %s could not be read", ", ".join(answer.failed_topics)
                )
            self.log_ends = answer.ends
            self.log_starts = answer.starts
            self.read_at = read_at = self.clock()
            for tp, end in answer.ends.items():
                history = self.histories.get(tp)
                if history is None:
                    history = self.histories[tp] = PartitionHistory()
                history.observe(read_at, answer.starts[tp], end)  # in both or neither
                await turns.take()
            for gone in self.histories.keys() - wanted:
                del self.histories[gone]
            self._placed.clear()
            await self.read_record_times(committed)
        await self.evaluate(ledger)

    def watches(self, group: GroupState) -> bool:
        """Whether ``group`` is this monitor's: its cluster's, when it watches one."""
        return not self.one_cluster or group.cluster == self.cluster

    def _committed(self, ledger: Ledger) -> list[OffsetMap]:
        """The committed offsets of every group this process commits."""
        return [
            g.committed.offsets
            for g in ledger.groups.values()
            if g.committed is not None and ledger.commits(g.group_id) and self.watches(g)
        ]

    def oldest_unread(self, tp: TopicPartition, committed: int) -> int | None:
        """The offset of the oldest record the job has not processed, while it lags."""
        end = self.log_ends.get(tp)
        if end is None or committed >= end:
            return None
        return max(committed, self.log_starts.get(tp, committed))

    def placed(self, tp: TopicPartition, offset: int) -> float | None:
        """When the record at ``offset`` reached the log, from the history alone (None:
        it cannot tell); kept until the next read, as many groups ask the same."""
        key = (tp, offset)
        if key not in self._placed:
            history = self.histories.get(tp)
            self._placed[key] = history.appended_at(offset, self.max_gap) if history else None
        return self._placed[key]

    def appended_at(self, tp: TopicPartition, offset: int) -> float | None:
        """When the record at ``offset`` reached the log: from the history, else from
        the timestamp read from Kafka (None: neither is known)."""
        at = self.placed(tp, offset)
        return at if at is not None else self._record_times.get((tp, offset))

    async def read_record_times(self, committed: list[OffsetMap]) -> None:
        """Read the timestamps that the histories cannot place (one call), and forget
        those no group waits on any more; ``committed``: every committing group's
        offsets, as the read of the log ends asked for them."""
        needed: dict[TopicPartition, int] = {}
        kept: set[tuple[TopicPartition, int]] = set()
        turns = Turns()
        for offsets in committed:
            for tp, offset in offsets.items():
                oldest = self.oldest_unread(tp, offset)
                if oldest is None or self.placed(tp, oldest) is not None:
                    continue
                if (tp, oldest) in self._record_times:
                    kept.add((tp, oldest))
                else:
                    needed.setdefault(tp, oldest)
            await turns.take()
        for key in self._record_times.keys() - kept:
            del self._record_times[key]
        if not needed or self.record_times is None:
            return
        self.counters.record_reads += 1
        self.counters.record_partitions += len(needed)
        try:
            found = await self.record_times.record_times(needed)
        except KafkaReadError as exc:
            self.counters.record_failures += 1
            log.warning("reading %d record timestamps failed: %s", len(needed), exc)
            return
        for tp, at in found.items():
            self._record_times[(tp, needed[tp])] = at

    async def evaluate(self, ledger: Ledger) -> None:  # noqa: C901  (one step per figure)
        now = self.clock()
        groups = [
            g for g in ledger.groups.values() if ledger.commits(g.group_id) and self.watches(g)
        ]
        if self.board is not None:
            await self.seed_windows([g.group_id for g in groups])
        inputs: dict[str, StatusInputs] = {}
        statuses: dict[str, GroupStatus] = {}
        evaluated_in: dict[str, int] = {}
        changed: list[GroupState] = []
        fresh = self.read_at is not None and self.read_at > (self.evaluated_at or -1.0)
        lags: dict[str, GroupLag] = {}
        turns = Turns()
        for group in groups:
            group_id = group.group_id
            inputs[group_id] = now_inputs = status_inputs(group, self.log_ends, self.log_starts)
            if fresh:
                self._observe_trend(group, now)
            kept = self.statuses.get(group_id)
            kept_lag = self.lags.get(group_id)
            if (
                kept is not None
                and (kept_lag is not None or group.committed is None)
                and self._inputs.get(group_id) == now_inputs
                and not kept.lagging  # its status holds while its inputs do
            ):
                statuses[group_id] = kept
                evaluated_in[group_id] = self.evaluated_in.get(group_id, self.rounds + 1)
                if kept_lag is not None:
                    lags[group_id] = self._with_trend(kept_lag, group_id)
            else:
                changed.append(group)
            await turns.take()
        for group in changed:
            self.windows.sample(group, self.log_ends, now)
            await turns.take()
        self.windows.keep_only(inputs)
        for group in changed:
            statuses[group.group_id] = status = self.status_of(group, now)
            evaluated_in[group.group_id] = self.rounds + 1
            if group.committed is not None:  # no lag to speak of before a first commit
                lags[group.group_id] = self.lag_of(group, status.total_lag, now)
            await turns.take()
        self.evaluations += len(changed)
        # The previous evaluation's objects are freed a few at a time, from copies: a
        # reader may hold the old tables across its own turns, and they stay whole.
        old = (self._inputs, dict(self.statuses), dict(self.lags))
        self._inputs, self.statuses, self.lags = inputs, statuses, lags
        self.evaluated_in = evaluated_in
        self.rounds += 1
        self._forget_gone(inputs.keys())
        self.evaluated_at = now
        for table in old:
            await turns.drain(table)
        if self.board is not None:
            await self.publish(ledger, now)

    async def seed_windows(self, group_ids: list[str]) -> None:
        """Start the windows of groups new here from the board (their last owner's)."""
        assert self.board is not None
        new = [g for g in group_ids if not self.windows.knows(g)]
        if not new:
            return
        try:
            stored = await asyncio.to_thread(self.board.windows, new)
        except StoreError as exc:
            log.warning("could not read the status windows of %d new groups: %s", len(new), exc)
            return
        for group_id, window in stored.items():
            self.windows.seed(group_id, window)

    async def publish(self, ledger: Ledger, now: float) -> None:
        """Put the reports of this replica's groups that changed on the board."""
        assert self.board is not None
        entries: list[BoardEntry] = []
        contents: dict[str, _Content] = {}
        folders = self.folders()
        for group_id, status in self.statuses.items():
            group = ledger.groups.get(group_id)
            if group is None:
                continue
            report = self.report(status, group, ledger, now, folders.get(group_id, ()))
            entry = BoardEntry(report, self.windows.window_of(group_id))
            content = (replace(report, evaluated_at=0.0, log_ends_read_at=None), entry.window)
            if self._published.get(group_id) != content:
                entries.append(entry)
                contents[group_id] = content
        for gone in self._published.keys() - self.statuses.keys():
            del self._published[gone]
        if not entries:
            return
        try:
            await asyncio.to_thread(self.board.publish, entries)
        except StoreError as exc:
            log.warning("could not publish %d group reports: %s", len(entries), exc)
            return
        self._published.update(contents)

    def report(
        self,
        status: GroupStatus,
        group: GroupState,
        ledger: Ledger,
        now: float,
        folders: tuple[FolderReport, ...] = (),
        lag: GroupLag | None = None,
    ) -> GroupReport:
        """``status`` with what the ledger's memory holds of the group's commits."""
        query = ledger.queries.get(group.query_id) if group.query_id else None
        pending = len(query.pending) if query is not None else 0
        replica = self.board.replica_id if self.board is not None else None
        return report_of(
            status,
            group,
            pending,
            now,
            self.read_at,
            replica,
            folders,
            lag if lag is not None else self.lags.get(group.group_id),
            self.waits(group.group_id) if group.in_flight is not None else None,
        )

    def report_now(self, group: GroupState, ledger: Ledger, now: float) -> GroupReport:
        """The group evaluated at ``now`` on the last read, status and lag figures alike
        (its status window and lost records are left to the evaluations)."""
        status = self.status_of(group, now)
        # No lag to speak of before a first commit.
        lag = self.lag_of(group, status.total_lag, now, count=False) if group.committed else None
        return self.report(status, group, ledger, now, lag=lag)

    def status_of(self, group: GroupState, now: float) -> GroupStatus:
        """The group's status at ``now``, on the last known log ends."""
        return self.windows.evaluate(group, self.log_ends, now, err_after=self.err_after_failures)

    def lag_of(
        self, group: GroupState, total_lag: int | None, now: float, *, count: bool = True
    ) -> GroupLag:
        """The group's lag figures at ``now``, on the last read; with ``count``, counts
        its newly lost records (the evaluations do, a read of one group does not)."""
        group_id = group.group_id
        committed = group.committed
        partitions = []
        for tp, offset in sorted(committed.offsets.items()) if committed else ():
            start = self.log_starts.get(tp)
            oldest = self.oldest_unread(tp, offset)
            history = self.histories.get(tp)
            figures = partition_lag(
                tp.topic,
                tp.partition,
                offset,
                start,
                self.log_ends.get(tp),
                self.appended_at(tp, oldest) if oldest is not None else None,
                history.start_rate() if history is not None else None,
                now,
            )
            if count and figures.lost and start is not None:
                self._count_lost(group_id, tp, offset, start)
            partitions.append(figures)
        trend = self.trends.get(group_id) or GroupTrend()
        return GroupLag(
            partitions=PackedLags(partitions),  # kept until the next read: packed
            data_status=data_status(partitions, self.risk_seconds),
            lost_total=sum(self.lost.get(group_id, {}).values()),
            catch_up=trend.catch_up(total_lag, self.jobs.get(group_id)),
            trend=trend.last_hour,
        )

    def _count_lost(self, group_id: str, tp: TopicPartition, committed: int, start: int) -> None:
        key = (group_id, tp)
        counted = max(committed, self._lost_upto.get(key, committed))
        if start > counted:
            by_topic = self.lost.setdefault(group_id, {})
            by_topic[tp.topic] = by_topic.get(tp.topic, 0) + start - counted
            self._lost_upto[key] = start
            log.warning(
                "group %s: records %d to %d of %s were deleted before its job read them",
                group_id,
                counted,
                start - 1,
                tp,
            )

    def _observe_trend(self, group: GroupState, now: float) -> None:
        committed = group.committed
        if committed is None:
            return
        ends = 0
        for tp in committed.offsets:
            end = self.log_ends.get(tp)
            if end is None:
                return  # a trend point needs every partition's log end
            ends += end
        trend = self.trends.get(group.group_id)
        if trend is None:
            trend = self.trends[group.group_id] = GroupTrend()
        trend.observe(TrendPoint(now, sum(committed.offsets.values()), ends))

    def _with_trend(self, kept: GroupLag, group_id: str) -> GroupLag:
        trend = self.trends.get(group_id)
        hour = trend.last_hour if trend is not None else ()
        return kept if hour is kept.trend else replace(kept, trend=hour)

    def _forget_gone(self, present: Collection[str]) -> None:
        for table in (self.trends, self.jobs, self.lost):
            for gone in table.keys() - present:
                del table[gone]
        for key in [k for k in self._lost_upto if k[0] not in present]:
            del self._lost_upto[key]
