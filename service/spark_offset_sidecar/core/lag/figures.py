"""Lag you can act on, per group: lag in time, data at risk, catch-up
(docs/operate/lag-in-time.md says each). Per partition, with ``c`` the committed offset,
``s`` the log start and ``e`` the log end: lag ``e - c``; lag_seconds the age of the record
at ``max(c, s)`` (None while not known, never NaN); lost ``s - c`` when ``c < s``; margin
``c - s`` and margin_seconds, margin over the rate the log start advanced.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from statistics import linear_regression
from typing import NamedTuple

from spark_offset_sidecar.core.lag.packed_rows import (
    PackedRows,
    float_or_none,
    int_or_none,
    none_if_nan,
    none_if_no_int,
)

TREND_READS = 12  # reads the catch-up rates are fitted on
SPARK_POINTS = 60  # one point a minute: the last hour of lag
SPARK_STEP = 60.0


class DataStatus(enum.Enum):
    OK = "OK"
    AT_RISK = "AT_RISK"
    LOST = "LOST"


DATA_SEVERITY = (DataStatus.OK, DataStatus.AT_RISK, DataStatus.LOST)


class CatchUpState(enum.Enum):
    CAUGHT_UP = "caught_up"
    CATCHING_UP = "catching_up"
    FALLING_BEHIND = "falling_behind"
    STALLED = "stalled"
    UNKNOWN = "unknown"


class PartitionLag(NamedTuple):
    topic: str
    partition: int
    committed: int
    log_start: int | None
    log_end: int | None
    lag: int | None
    lag_seconds: float | None
    lost: int  # records below the log start now (0: none)
    margin: int | None  # records between the log start and the committed offset
    margin_seconds: float | None


class PackedLags(PackedRows[PartitionLag]):
    """A group's ``PartitionLag`` rows as columns (``core.lag.packed_rows``): what the lag
    monitor keeps between two reads."""

    __slots__ = ()
    width = 7
    real_width = 2

    def split(self, row: PartitionLag) -> tuple[str, Sequence[int], Sequence[float]]:
        whole = (
            row.partition,
            row.committed,
            int_or_none(row.log_start),
            int_or_none(row.log_end),
            int_or_none(row.lag),
            row.lost,
            int_or_none(row.margin),
        )
        return row.topic, whole, (float_or_none(row.lag_seconds), float_or_none(row.margin_seconds))

    def join(
        self, topic: str, ints: Sequence[int], at: int, reals: Sequence[float], at_real: int
    ) -> PartitionLag:
        return PartitionLag(
            topic,
            ints[at],
            ints[at + 1],
            none_if_no_int(ints[at + 2]),
            none_if_no_int(ints[at + 3]),
            none_if_no_int(ints[at + 4]),
            none_if_nan(reals[at_real]),
            ints[at + 5],
            none_if_no_int(ints[at + 6]),
            none_if_nan(reals[at_real + 1]),
        )

    def figures(self) -> Iterator[Figures]:
        """Each partition's ``Figures``, read from the columns (no row is made)."""
        ints, reals, w, r = self.ints, self.reals, self.width, self.real_width
        return map(
            Figures._make,
            zip(
                self._topics,
                ints[0::w],  # partition
                map(none_if_no_int, ints[4::w]),  # lag
                map(none_if_nan, reals[0::r]),  # lag_seconds
                map(none_if_nan, reals[1::r]),  # margin_seconds
                strict=True,
            ),
        )


class Figures(NamedTuple):
    """What a series of ``/metrics`` reads of a partition's lag (``figures_of``)."""

    topic: str
    partition: int
    lag: int | None
    lag_seconds: float | None
    margin_seconds: float | None


def figures_of(partitions: Sequence[PartitionLag]) -> Iterator[Figures]:
    """The ``Figures`` of each of ``partitions``, in order: read from the columns when they
    are packed (a scrape reads every partition of every group)."""
    if isinstance(partitions, PackedLags):
        return partitions.figures()
    return (
        Figures(p.topic, p.partition, p.lag, p.lag_seconds, p.margin_seconds) for p in partitions
    )


@dataclass(frozen=True)
class JobRates:
    """What the job's last progress event said of its pace."""

    at: float
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    batch_duration_ms: int | None


@dataclass(frozen=True)
class CatchUp:
    state: CatchUpState
    eta_seconds: float | None = None  # CATCHING_UP: until the lag is 0 at these rates
    consume_rate: float | None = None  # records/s the committed offsets advance
    produce_rate: float | None = None  # records/s the log ends advance
    job: JobRates | None = None

    @property
    def lag_rate(self) -> float | None:
        """Records/s by which the lag grows (negative: shrinks)."""
        if self.consume_rate is None or self.produce_rate is None:
            return None
        return self.produce_rate - self.consume_rate


@dataclass(frozen=True)
class GroupLag:
    partitions: Sequence[PartitionLag]  # PackedLags as the lag monitor keeps them
    data_status: DataStatus
    lost_total: int  # records counted lost for this group since this process started
    catch_up: CatchUp
    trend: tuple[tuple[float, int], ...] = ()  # (minute, lag): the last hour

    @cached_property
    def lag_seconds(self) -> float | None:
        """The group's time lag: its most late partition's (None: some lagging partition's
        is not known). Kept once computed: every read of the fleet asks for it."""
        return max_lag_seconds(figures_of(self.partitions))

    @property
    def margin_seconds(self) -> float | None:
        """The soonest any partition's unprocessed records start to be deleted."""
        known = [
            p.margin_seconds for p in figures_of(self.partitions) if p.margin_seconds is not None
        ]
        return min(known, default=None)


def partition_lag(
    topic: str,
    partition: int,
    committed: int,
    log_start: int | None,
    log_end: int | None,
    appended_at: float | None,
    start_rate: float | None,
    now: float,
) -> PartitionLag:
    """One partition's figures; ``appended_at``: when the oldest unprocessed record (at
    max(committed, log_start)) reached the log, from the history or Kafka (None: not
    known); ``start_rate``: records/s the log start advances (None: not seen moving)."""
    if log_end is None:
        return PartitionLag(topic, partition, committed, log_start, None, None, None, 0, None, None)
    lag = max(0, log_end - committed)
    lost = max(0, log_start - committed) if log_start is not None else 0
    seconds: float | None
    seconds = 0.0 if lag == 0 else None if appended_at is None else max(0.0, now - appended_at)
    margin = margin_seconds = None
    if log_start is not None and not lost:
        margin = committed - log_start
        if start_rate is not None and start_rate > 0 and lag:
            margin_seconds = margin / start_rate
    return PartitionLag(
        topic, partition, committed, log_start, log_end, lag, seconds, lost, margin, margin_seconds
    )


def max_lag_seconds(partitions: Iterable[PartitionLag | Figures]) -> float | None:
    """The most late of ``partitions``; None when any of them is not known (a max over
    the known ones would hide the partition that is probably the latest)."""
    worst = 0.0
    for p in partitions:
        if p.lag_seconds is None:
            return None
        worst = max(worst, p.lag_seconds)
    return worst


def data_status(partitions: Sequence[PartitionLag], risk_seconds: float) -> DataStatus:
    if any(p.lost for p in partitions):
        return DataStatus.LOST
    if any(p.margin_seconds is not None and p.margin_seconds < risk_seconds for p in partitions):
        return DataStatus.AT_RISK
    return DataStatus.OK


class TrendPoint(NamedTuple):
    at: float
    committed: int  # sum over the group's partitions
    ends: int  # sum of their log ends


@dataclass
class GroupTrend:
    """A group's recent reads (for the rates) and its last hour of lag, a point a minute."""

    reads: deque[TrendPoint] = field(default_factory=lambda: deque(maxlen=TREND_READS))
    hour: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=SPARK_POINTS))
    _shown: tuple[tuple[float, int], ...] = ()  # ``hour`` as a tuple, made when it changes

    def observe(self, point: TrendPoint) -> None:
        if self.reads and (
            point.committed < self.reads[-1].committed or point.ends < self.reads[-1].ends
        ):
            self.reads.clear()  # its partitions changed: the sums are not comparable
        self.reads.append(point)
        minute = point.at - point.at % SPARK_STEP
        lag = max(0, point.ends - point.committed)
        if self.hour and self.hour[-1][0] == minute:
            if lag > self.hour[-1][1]:
                self.hour[-1] = (minute, lag)
                self._shown = ()
        else:
            self.hour.append((minute, lag))
            self._shown = ()

    @property
    def last_hour(self) -> tuple[tuple[float, int], ...]:
        """``hour`` as a tuple (the same object while it does not change)."""
        if len(self._shown) != len(self.hour):
            self._shown = tuple(self.hour)
        return self._shown

    def catch_up(self, lag: int | None, job: JobRates | None) -> CatchUp:
        if lag == 0:
            return CatchUp(CatchUpState.CAUGHT_UP, job=job)
        reads = list(self.reads)
        if lag is None or len(reads) < 2 or reads[-1].at <= reads[0].at:
            return CatchUp(CatchUpState.UNKNOWN, job=job)
        times = [r.at for r in reads]  # least-squares slopes
        consume = linear_regression(times, [r.committed for r in reads]).slope
        produce = linear_regression(times, [r.ends for r in reads]).slope
        net = consume - produce
        if consume <= 0:
            state, eta = CatchUpState.STALLED, None
        elif net > 0:
            state, eta = CatchUpState.CATCHING_UP, lag / net
        else:
            state, eta = CatchUpState.FALLING_BEHIND, None
        return CatchUp(state, eta, consume, produce, job)
