"""A consumer group's status as Burrow's evaluator judges it: no thresholds, a sliding
window of the group's commits and their lag (docs/operate/status.md). Rules per
partition, the first that holds (P3-P8 are Burrow's):

  P1 OK      the current lag is 0
  P2 STOP    records have waited ``stop_after`` seconds with no commit (Burrow misses it)
  P3 OK      some sample in the window has lag 0, or fewer than two samples
  P4 REWIND  an offset in the window is lower than the one before it
  P5 STOP    the time since the last commit exceeds the time the window's commits span
  P6 STALL   every sample has the same offset while the lag stays above zero
  P7 WARN    the offsets move but the lag never decreases from one sample to the next
  P8 OK      otherwise

Group: ERR when its last ``err_after`` commits all failed, else the worst of its
partitions by ``SEVERITY``. A partition whose log end is unknown is OK and not complete.
"""

from __future__ import annotations

import enum
import math
from array import array
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import NamedTuple

from spark_offset_sidecar.core.lag.packed_rows import PackedRows, int_or_none, none_if_no_int
from spark_offset_sidecar.core.ledger.state import GroupState
from spark_offset_sidecar.core.offsets import OffsetMap, TopicPartition


class Status(enum.Enum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"
    ERR = "ERR"


SEVERITY = (Status.OK, Status.WARN, Status.STALL, Status.STOP, Status.REWIND, Status.ERR)
_RANK = {status: rank for rank, status in enumerate(SEVERITY)}


@dataclass(frozen=True)
class GroupSample:
    """The group's committed offsets at ``at`` (the commit's time) and their lags, as arrays
    aligned with ``partitions`` (shared by consecutive samples of one partition set)."""

    at: float
    partitions: tuple[TopicPartition, ...]
    offsets: array[int]
    lags: array[int]


@dataclass(frozen=True)
class StoredWindow:
    """A group's window as it is handed from one owner to the next (``CommitWindows.
    window_of`` / ``seed``): its samples, oldest first, and since when its lag has been
    above zero (P2), so that a new owner judges on the old owner's history."""

    samples: tuple[GroupSample, ...]
    lagging_since: float | None


class PartitionStatus(NamedTuple):
    """One partition's status (a named tuple: a group of 32 partitions builds 32 at each
    evaluation, and a tuple is built at C speed)."""

    topic: str
    partition: int
    status: Status
    offset: int
    log_end: int | None
    current_lag: int | None
    samples: int


class PackedStatuses(PackedRows[PartitionStatus]):
    """A group's ``PartitionStatus`` rows as columns (``core.lag.packed_rows``): what the lag
    monitor keeps between two reads."""

    __slots__ = ()
    width = 6
    real_width = 0

    def split(self, row: PartitionStatus) -> tuple[str, Sequence[int], Sequence[float]]:
        whole = (
            row.partition,
            _RANK[row.status],
            row.offset,
            int_or_none(row.log_end),
            int_or_none(row.current_lag),
            row.samples,
        )
        return row.topic, whole, ()

    def join(
        self, topic: str, ints: Sequence[int], at: int, reals: Sequence[float], at_real: int
    ) -> PartitionStatus:
        return PartitionStatus(
            topic,
            ints[at],
            SEVERITY[ints[at + 1]],
            ints[at + 2],
            none_if_no_int(ints[at + 3]),
            none_if_no_int(ints[at + 4]),
            ints[at + 5],
        )


@dataclass(frozen=True)
class GroupStatus:
    group_id: str
    query_id: str | None
    status: Status
    complete: float  # share of partitions with a full window, as Burrow reports it
    total_lag: int | None  # None while nothing is committed or any partition's end is unknown
    consecutive_failures: int
    last_commit_at: float | None
    partitions: Sequence[PartitionStatus]  # PackedStatuses as evaluated

    @cached_property
    def lagging(self) -> bool:
        """Whether some partition lags (kept once known: the lag monitor asks it of every
        kept status at every read)."""
        return any(p.current_lag for p in self.partitions)

    @property
    def max_lag(self) -> PartitionStatus | None:
        known = [p for p in self.partitions if p.current_lag is not None]
        return max(known, key=lambda p: p.current_lag or 0, default=None)


StatusInputs = tuple[object, ...]


def status_inputs(
    group: GroupState,
    log_ends: Mapping[TopicPartition, int],
    log_starts: Mapping[TopicPartition, int] | None = None,
) -> StatusInputs:
    """What a group's status and lag figures are computed from, but the time. Equal inputs
    give an equal status at any later time when no partition lags (``GroupStatus.lagging``):
    only a lagging partition reaches the rules that read the time (P2, P5)."""
    committed = group.committed
    if committed is None:
        return None, group.query_id, group.failures, (), ()
    ends = tuple(map(log_ends.get, committed.offsets))
    starts = tuple(map(log_starts.get, committed.offsets)) if log_starts is not None else ()
    return committed, group.query_id, group.failures, ends, starts


def partition_status(  # noqa: PLR0911  (Burrow's rules, one return each)
    series: list[tuple[float, int, int]],
    current_lag: int,
    now: float,
    *,
    waited: float = 0.0,
    stop_after: float = math.inf,
) -> Status:
    """P1-P8 on one partition's window: ``series`` of (commit time, offset, lag), oldest
    first; ``waited``: seconds that records have waited with no commit (P2)."""
    if current_lag == 0:
        return Status.OK
    if waited > stop_after:
        return Status.STOP
    if len(series) < 2 or any(lag == 0 for _, _, lag in series):
        return Status.OK
    pairs = list(pairwise(series))
    if any(later[1] < earlier[1] for earlier, later in pairs):
        return Status.REWIND
    first_at, last_at = series[0][0], series[-1][0]
    if now - last_at > last_at - first_at:
        return Status.STOP
    if all(later[1] == earlier[1] for earlier, later in pairs):
        return Status.STALL
    if all(later[2] >= earlier[2] for earlier, later in pairs):
        return Status.WARN
    return Status.OK


class CommitWindows:
    """Each group's last ``window`` samples."""

    def __init__(self, window: int = 10, stop_after: float = math.inf) -> None:
        if window < 2:
            raise ValueError("a status window needs at least 2 samples")
        self.window = window
        self.stop_after = stop_after
        self._samples: dict[str, deque[GroupSample]] = {}
        self._lagging_since: dict[str, float] = {}  # first read of the current lag > 0

    def sample(self, group: GroupState, log_ends: Mapping[TopicPartition, int], now: float) -> None:
        """After a read of the log ends: a sample of ``group`` if it committed since its last
        one (``keep_only`` forgets the groups gone)."""
        committed = group.committed
        if committed is None:
            return
        lagging = any(log_ends.get(tp, o) > o for tp, o in committed.offsets.items())
        if not lagging:
            self._lagging_since.pop(group.group_id, None)
        else:
            self._lagging_since.setdefault(group.group_id, now)
        window = self._samples.get(group.group_id)
        if window is None:
            window = self._samples[group.group_id] = deque(maxlen=self.window)
        if window and window[-1].at >= committed.at:
            return
        if any(tp not in log_ends for tp in committed.offsets):
            return  # sampled at the next read that knows every partition
        partitions = tuple(committed.offsets)
        if window and window[-1].partitions == partitions:
            partitions = window[-1].partitions
        offsets = array("q", committed.offsets.values())
        lags = array("q", (max(0, log_ends[tp] - o) for tp, o in committed.offsets.items()))
        window.append(GroupSample(committed.at, partitions, offsets, lags))

    def keep_only(self, present: Collection[str]) -> None:
        """Forget the windows of groups not in ``present`` (gone)."""
        for table in (self._samples, self._lagging_since):
            for gone in [g for g in table if g not in present]:
                del table[gone]

    def samples(self, group_id: str) -> tuple[GroupSample, ...]:
        return tuple(self._samples.get(group_id, ()))

    def knows(self, group_id: str) -> bool:
        """Whether ``group_id`` has a window here (``sample`` saw it since it was last
        gone): a group without one may be ``seed``-ed from a previous owner's."""
        return group_id in self._samples

    def window_of(self, group_id: str) -> StoredWindow:
        return StoredWindow(self.samples(group_id), self._lagging_since.get(group_id))

    def seed(self, group_id: str, stored: StoredWindow) -> None:
        """Start ``group_id``'s window from ``stored`` (its newest ``window`` samples); a
        group that has a window here already keeps its own."""
        if group_id in self._samples:
            return
        self._samples[group_id] = deque(stored.samples, maxlen=self.window)
        if stored.lagging_since is not None:
            self._lagging_since[group_id] = stored.lagging_since

    def evaluate(
        self,
        group: GroupState,
        log_ends: Mapping[TopicPartition, int],
        now: float,
        *,
        err_after: int,
    ) -> GroupStatus:
        committed = group.committed
        offsets: OffsetMap = committed.offsets if committed else {}
        samples = self._samples.get(group.group_id, ())
        # Where each partition sits in each sample (one index per distinct partition set).
        indexes: dict[int, dict[TopicPartition, int]] = {}
        for sample in samples:
            if id(sample.partitions) not in indexes:
                indexes[id(sample.partitions)] = {tp: i for i, tp in enumerate(sample.partitions)}
        placed = [(sample, indexes[id(sample.partitions)]) for sample in samples]
        # The usual window: every sample of one partition set. Then a partition is in all
        # samples or in none, and the samples it is in are counted without a look each.
        only = next(iter(indexes.values())) if len(indexes) == 1 else None
        waited = 0.0
        if committed is not None and group.group_id in self._lagging_since:
            waited = now - max(committed.at, self._lagging_since[group.group_id])
        partitions = [
            self._partition(tp, offset, log_ends.get(tp), placed, only, now, waited)
            for tp, offset in sorted(offsets.items())
        ]
        status = max((p.status for p in partitions), key=_RANK.__getitem__, default=Status.OK)
        if group.failures >= err_after:
            status = Status.ERR
        full = sum(1 for p in partitions if p.samples >= self.window)
        lags = [p.current_lag for p in partitions if p.current_lag is not None]
        return GroupStatus(
            group_id=group.group_id,
            query_id=group.query_id,
            status=status,
            complete=full / len(partitions) if partitions else 0.0,
            # Unknown, not 0, until a commit says where the group is (no partitions yet).
            total_lag=sum(lags) if partitions and len(lags) == len(partitions) else None,
            consecutive_failures=group.failures,
            last_commit_at=committed.at if committed else None,
            partitions=PackedStatuses(partitions),  # kept until the next read: packed
        )

    def _partition(
        self,
        tp: TopicPartition,
        offset: int,
        log_end: int | None,
        placed: list[tuple[GroupSample, dict[TopicPartition, int]]],
        only: dict[TopicPartition, int] | None,
        now: float,
        waited: float,
    ) -> PartitionStatus:
        lag = None if log_end is None else max(0, log_end - offset)
        if not lag:  # unknown (OK, incomplete) or P1: no series needed
            if only is not None:
                seen = len(placed) if tp in only else 0
            else:
                seen = sum(1 for _, index in placed if tp in index)
            return PartitionStatus(tp.topic, tp.partition, Status.OK, offset, log_end, lag, seen)
        at = [index.get(tp) for _, index in placed]
        seen = len(at) - at.count(None)
        series = [
            (sample.at, sample.offsets[i], sample.lags[i])
            for (sample, _), i in zip(placed, at, strict=True)
            if i is not None
        ]
        status = partition_status(series, lag, now, waited=waited, stop_after=self.stop_after)
        return PartitionStatus(tp.topic, tp.partition, status, offset, log_end, lag, seen)
