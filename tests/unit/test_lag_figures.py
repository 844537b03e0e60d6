"""The pure core of time lag, data at risk and catch-up (``core.lag.log_history``,
``core.lag.figures``): estimates checked against the truth they estimate, on logs whose
every record's append time the test knows."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spark_offset_sidecar.core.lag.figures import (
    CatchUp,
    CatchUpState,
    DataStatus,
    GroupLag,
    GroupTrend,
    JobRates,
    PartitionLag,
    TrendPoint,
    data_status,
    max_lag_seconds,
    partition_lag,
)
from spark_offset_sidecar.core.lag.log_history import PartitionHistory
from spark_offset_sidecar.core.ledger.state import GroupCounters


def test_a_record_appended_between_two_reads_is_placed_within_their_gap() -> None:
    rng = random.Random(38)
    appended: list[float] = []  # the truth: when each offset reached the log
    history = PartitionHistory()
    now = 1000.0
    for read in range(40):
        for _ in range(rng.randrange(0, 30)):  # a bursty producer
            appended.append(now + rng.random() * 10)
        appended.sort()
        now += 10
        history.observe(now, 0, sum(1 for t in appended if t <= now))
        del read
    for offset in range(len(appended)):
        estimate = history.appended_at(offset, max_gap=15)
        if estimate is None:
            continue  # older than the history (capacity) or in a gap too wide
        assert abs(estimate - appended[offset]) <= 10, offset


def test_an_offset_older_than_the_history_or_not_yet_written_is_not_estimated() -> None:
    history = PartitionHistory()
    history.observe(100.0, 0, 50)
    history.observe(110.0, 0, 80)
    assert history.appended_at(10, max_gap=60) is None  # before the first read: ask Kafka
    assert history.appended_at(80, max_gap=60) is None  # not in the log yet
    assert 100 < (history.appended_at(60, max_gap=60) or 0) <= 110
    assert history.appended_at(60, max_gap=5) is None  # the reads are too far apart


def test_an_idle_partition_keeps_the_narrow_bracket_of_its_last_unchanged_read() -> None:
    history = PartitionHistory()
    history.observe(100.0, 0, 10)
    for t in range(110, 200, 10):
        history.observe(float(t), 0, 10)  # nothing new: not stored ...
    history.observe(200.0, 0, 20)  # ... until it changes: the read at 190 is stored first
    assert len(history.times) == 3
    estimate = history.appended_at(15, max_gap=15)
    assert estimate is not None
    assert 190 < estimate <= 200


def test_a_log_that_goes_backwards_starts_a_new_history() -> None:
    history = PartitionHistory()
    history.observe(100.0, 0, 500)
    history.observe(110.0, 0, 600)
    history.observe(120.0, 0, 5)  # the topic was deleted and created again
    assert list(history.ends) == [5]
    assert history.appended_at(550, max_gap=60) is None


def test_the_history_is_bounded() -> None:
    history = PartitionHistory(capacity=8)
    for t in range(100):
        history.observe(float(t), 0, t)
    assert len(history.times) == 8
    assert history.appended_at(10, max_gap=2) is None  # dropped: Kafka is asked instead


def test_time_lag_is_zero_when_caught_up_and_unknown_rather_than_a_guess() -> None:
    caught_up = partition_lag("t", 0, 50, 0, 50, None, None, now=100.0)
    assert (caught_up.lag, caught_up.lag_seconds) == (0, 0.0)
    unknown = partition_lag("t", 1, 40, 0, 50, None, None, now=100.0)
    assert (unknown.lag, unknown.lag_seconds) == (10, None)
    late = partition_lag("t", 2, 40, 0, 50, 70.0, None, now=100.0)
    assert late.lag_seconds == 30.0
    # The group's (or topic's) time lag is never the max of the known ones alone.
    assert max_lag_seconds([caught_up, unknown, late]) is None
    assert max_lag_seconds([caught_up, late]) == 30.0


def test_records_below_the_log_start_are_lost_and_the_margin_is_estimated() -> None:
    lost = partition_lag("t", 0, 100, 250, 900, 10.0, 5.0, now=100.0)
    assert (lost.lost, lost.margin, lost.margin_seconds) == (150, None, None)
    safe = partition_lag("t", 1, 400, 250, 900, 10.0, 5.0, now=100.0)
    assert (safe.lost, safe.margin, safe.margin_seconds) == (0, 150, 30.0)
    assert data_status((safe,), risk_seconds=10) is DataStatus.OK
    assert data_status((safe,), risk_seconds=60) is DataStatus.AT_RISK
    assert data_status((safe, lost), risk_seconds=60) is DataStatus.LOST
    still = partition_lag("t", 2, 400, 250, 900, 10.0, None, now=100.0)
    assert still.margin_seconds is None  # the log start has not been seen moving
    assert data_status((still,), risk_seconds=3600) is DataStatus.OK


def test_the_log_start_rate_comes_from_the_history() -> None:
    history = PartitionHistory()
    history.observe(0.0, 0, 1000)
    assert history.start_rate() is None
    history.observe(10.0, 0, 1100)
    history.observe(20.0, 200, 1200)  # retention deleted a segment of 200 records
    assert history.start_rate() == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("consume", "produce", "state"),
    [
        (100, 40, CatchUpState.CATCHING_UP),
        (40, 100, CatchUpState.FALLING_BEHIND),
        (0, 10, CatchUpState.STALLED),
    ],
)
def test_catch_up_follows_the_consume_and_produce_rates(
    consume: int, produce: int, state: CatchUpState
) -> None:
    trend = GroupTrend()
    committed, ends = 0, 5000
    for t in range(10):
        trend.observe(TrendPoint(float(t), committed, ends))
        committed += consume
        ends += produce
    lag = ends - produce - (committed - consume)
    job = JobRates(9.0, 40.0, 100.0, 800)
    estimate = trend.catch_up(lag, job)
    assert estimate.state is state
    assert estimate.job is job
    if state is CatchUpState.CATCHING_UP:
        assert estimate.eta_seconds == pytest.approx(lag / (consume - produce))
    assert estimate.consume_rate == pytest.approx(consume)
    assert estimate.produce_rate == pytest.approx(produce)


def test_catch_up_is_unknown_before_two_reads_and_caught_up_without_lag() -> None:
    trend = GroupTrend()
    assert trend.catch_up(10, None).state is CatchUpState.UNKNOWN
    trend.observe(TrendPoint(0.0, 0, 10))
    assert trend.catch_up(10, None).state is CatchUpState.UNKNOWN
    assert trend.catch_up(0, None).state is CatchUpState.CAUGHT_UP


def test_the_hour_of_lag_keeps_a_point_a_minute_the_worst_of_the_minute() -> None:
    trend = GroupTrend()
    for t in range(0, 7200, 10):
        trend.observe(TrendPoint(float(t), t, t + (500 if t % 60 == 30 else 100)))
    assert len(trend.hour) == 60
    assert {lag for _, lag in trend.hour} == {500}
    assert trend.hour[-1][0] == 7140.0


def test_a_groups_time_lag_is_its_latest_partitions_and_kept_once_computed() -> None:
    """``GroupLag.lag_seconds`` is computed once (the figures are frozen): the same answer
    every time, and none while a lagging partition's time is unknown."""
    late = PartitionLag("t", 0, 10, 0, 20, 10, 42.5, 0, 10, None)
    caught_up = PartitionLag("t", 1, 5, 0, 5, 0, 0.0, 0, 5, None)
    unknown = PartitionLag("t", 2, 5, 0, 9, 4, None, 0, 5, None)
    idle = CatchUp(CatchUpState.CAUGHT_UP, None, None, None)
    lag = GroupLag((late, caught_up), DataStatus.OK, 0, idle)
    assert lag.lag_seconds == 42.5
    assert lag.lag_seconds == 42.5
    assert lag == GroupLag((late, caught_up), DataStatus.OK, 0, idle), "equal by its fields"
    assert GroupLag((late, unknown), DataStatus.OK, 0, idle).lag_seconds is None


def test_a_copy_of_a_groups_counters_does_not_see_later_counts() -> None:
    counters = GroupCounters(succeeded=2, failed=Counter({"timeout": 1}))
    counters.events["accepted"] += 3
    copied = counters.copy()
    counters.succeeded += 1
    counters.failed["timeout"] += 1
    counters.events["stale"] += 1
    assert copied == GroupCounters(
        succeeded=2, failed=Counter({"timeout": 1}), events=Counter({"accepted": 3})
    )
    assert isinstance(copied.failed, Counter)
    assert copied.failed["never"] == 0, "still a Counter: a missing reason counts 0"
