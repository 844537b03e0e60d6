"""The Burrow-style status evaluator (core.lag.status): each rule, the window, and
hypothesis against Burrow's own evaluator (core/internal/evaluator/caching.go, rewritten
below as a reference model)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_offset_sidecar.core.lag.status import SEVERITY, CommitWindows, Status, partition_status
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def burrow(series: Sequence[tuple[float, int, int]], current_lag: int, now: float) -> Status:
    """Burrow 1.x's calculatePartitionStatus, series of (time, offset, lag)."""
    if current_lag > 0 and all(lag != 0 for _, _, lag in series):
        if any(series[i][1] < series[i - 1][1] for i in range(1, len(series))):
            return Status.REWIND
        if now - series[-1][0] > series[-1][0] - series[0][0]:
            return Status.STOP
        if all(series[i][1] == series[i - 1][1] for i in range(1, len(series))):
            return Status.STALL
        if all(series[i][2] >= series[i - 1][2] for i in range(1, len(series))):
            return Status.WARN
    return Status.OK


@pytest.mark.parametrize(
    ("series", "current_lag", "now", "expected"),
    [
        pytest.param([(0, 1, 5), (10, 2, 5)], 0, 11, Status.OK, id="P1 caught up now"),
        pytest.param([(0, 1, 5), (10, 2, 0), (20, 2, 5)], 5, 21, Status.OK, id="P3 lag was 0"),
        pytest.param([(0, 1, 5)], 5, 100, Status.OK, id="P3 one sample"),
        pytest.param([(0, 5, 5), (10, 4, 5), (20, 6, 3)], 3, 21, Status.REWIND, id="P4 rewind"),
        pytest.param([(0, 1, 5), (10, 2, 4), (20, 3, 3)], 3, 41, Status.STOP, id="P5 stopped"),
        pytest.param([(0, 1, 5), (10, 2, 4), (20, 3, 3)], 3, 39, Status.OK, id="P5 not yet"),
        pytest.param([(0, 7, 5), (10, 7, 6), (20, 7, 9)], 9, 21, Status.STALL, id="P6 stall"),
        pytest.param([(0, 1, 5), (10, 4, 5), (20, 9, 8)], 8, 21, Status.WARN, id="P7 lag grows"),
        pytest.param([(0, 1, 5), (10, 4, 6), (20, 9, 2)], 2, 21, Status.OK, id="P8 catching up"),
    ],
)
def test_each_rule(
    series: list[tuple[float, int, int]], current_lag: int, now: float, expected: Status
) -> None:
    assert partition_status(series, current_lag, now) is expected


samples = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 30), st.integers(0, 6)), min_size=2, max_size=8
).map(lambda raw: [(float(10 * i + gap), offset, lag) for i, (gap, offset, lag) in enumerate(raw)])


@given(series=samples, current_lag=st.integers(0, 6), later=st.floats(0, 400))
def test_agrees_with_burrow_from_two_samples_on(
    series: list[tuple[float, int, int]], current_lag: int, later: float
) -> None:
    """Without P2 (records waiting ``stop_after``) the rules are Burrow's."""
    now = series[-1][0] + later
    assert partition_status(series, current_lag, now) is burrow(series, current_lag, now)


@given(series=samples, current_lag=st.integers(1, 6), waited=st.floats(0, 1000))
def test_records_waiting_past_stop_after_are_stop_whatever_the_window(
    series: list[tuple[float, int, int]], current_lag: int, waited: float
) -> None:
    now = series[-1][0] + 1
    status = partition_status(series, current_lag, now, waited=waited, stop_after=500.0)
    if waited > 500.0:
        assert status is Status.STOP
    else:
        assert status is burrow(series, current_lag, now)


def group(at: float | None, offsets: dict[TopicPartition, int], failures: int = 0) -> GroupState:
    committed = CommittedOffsets("q1", 1, offsets, at) if at is not None else None
    return GroupState("g1", query_id="q1", committed=committed, failures=failures)


def test_a_sample_per_new_commit_only_and_the_window_is_bounded() -> None:
    windows = CommitWindows(window=3)
    ends = {TP0: 100}
    for at, offset in [(1.0, 10), (1.0, 10), (2.0, 20), (3.0, 30), (4.0, 40)]:
        windows.sample(group(at, {TP0: offset}), ends, at)
    assert [(s.at, list(s.lags)) for s in windows.samples("g1")] == [
        (2.0, [80]),
        (3.0, [70]),
        (4.0, [60]),
    ]


def test_a_partition_whose_log_end_is_unknown_is_ok_incomplete_and_not_zero_lag() -> None:
    windows = CommitWindows(window=2)
    windows.sample(group(1.0, {TP0: 10, TP1: 10}), {TP0: 50}, 1.0)
    assert windows.samples("g1") == ()  # sampled once every partition's end is known
    status = windows.evaluate(group(1.0, {TP0: 10, TP1: 10}), {TP0: 50}, 5.0, err_after=3)
    assert status.total_lag is None
    assert [(p.current_lag, p.status) for p in status.partitions] == [
        (40, Status.OK),
        (None, Status.OK),
    ]
    assert status.complete == 0.0


def test_a_group_with_nothing_committed_yet_has_unknown_lag_not_zero() -> None:
    """Its commit not yet recorded when the fleet is evaluated (a test against a secured
    broker read 0 there and took it for the lag)."""
    status = CommitWindows(window=2).evaluate(group(None, {}), {TP0: 50}, 5.0, err_after=3)
    assert (status.total_lag, list(status.partitions)) == (None, [])


def test_group_is_its_worst_partition_and_err_after_repeated_failures() -> None:
    windows = CommitWindows(window=3)
    for at, o0, o1 in [(0.0, 10, 5), (10.0, 20, 5), (20.0, 30, 5)]:
        windows.sample(group(at, {TP0: o0, TP1: o1}), {TP0: 30, TP1: 50}, at)
    ok_and_stalled = group(20.0, {TP0: 30, TP1: 5})
    status = windows.evaluate(ok_and_stalled, {TP0: 30, TP1: 50}, 21.0, err_after=3)
    assert [p.status for p in status.partitions] == [Status.OK, Status.STALL]
    assert status.status is Status.STALL
    assert (status.total_lag, status.complete) == (45, 1.0)
    assert status.max_lag is not None
    assert status.max_lag.partition == 1
    failing = group(20.0, {TP0: 30, TP1: 5}, failures=3)
    assert windows.evaluate(failing, {TP0: 30, TP1: 50}, 21.0, err_after=3).status is Status.ERR
    assert windows.evaluate(failing, {TP0: 30, TP1: 50}, 21.0, err_after=4).status is Status.STALL


def test_idle_caught_up_group_stays_ok_and_records_waiting_too_long_make_it_stop() -> None:
    windows = CommitWindows(window=3, stop_after=300.0)
    for at, offset in [(0.0, 10), (10.0, 20), (20.0, 30)]:
        windows.sample(group(at, {TP0: offset}), {TP0: 30}, at)
    idle = group(20.0, {TP0: 30})
    windows.sample(idle, {TP0: 30}, 10_000.0)
    assert windows.evaluate(idle, {TP0: 30}, 10_000.0, err_after=3).status is Status.OK
    # Hours later records arrive: the job has stop_after to commit them, counted from the
    # first read that saw them, not from its last commit hours ago.
    windows.sample(idle, {TP0: 90}, 10_010.0)
    assert windows.evaluate(idle, {TP0: 90}, 10_300.0, err_after=3).status is Status.OK
    windows.sample(idle, {TP0: 95}, 10_311.0)
    assert windows.evaluate(idle, {TP0: 95}, 10_311.0, err_after=3).status is Status.STOP
    # Burrow alone would still say OK: the window's last sample had lag 0.
    assert CommitWindows(window=3).evaluate(idle, {TP0: 95}, 10_311.0, err_after=3).status is (
        Status.OK
    )
    # It commits: the wait starts again (a commit at 10,320 with records still behind).
    moving = group(10_320.0, {TP0: 60})
    windows.sample(moving, {TP0: 95}, 10_321.0)
    assert windows.evaluate(moving, {TP0: 95}, 10_330.0, err_after=3).status is not Status.STOP


def test_groups_that_are_gone_are_forgotten() -> None:
    windows = CommitWindows(window=2)
    windows.sample(group(1.0, {TP0: 1}), {TP0: 5}, 1.0)
    assert windows.samples("g1")
    windows.keep_only(())
    assert windows.samples("g1") == ()


def test_a_new_owner_seeded_with_the_old_owners_window_judges_as_the_old_one_would() -> None:
    """A group changes owner: seeded with the old owner's window, the new one gives the
    same status at once (here STALL, which takes a window to see) and goes on sampling
    into it; without the window it would have to start over (OK, incomplete)."""
    old = CommitWindows(window=3, stop_after=300.0)
    for at, o0, o1 in [(0.0, 10, 5), (10.0, 20, 5), (20.0, 30, 5)]:
        old.sample(group(at, {TP0: o0, TP1: o1}), {TP0: 30, TP1: 50}, at)
    old.sample(group(20.0, {TP0: 30, TP1: 5}), {TP0: 40, TP1: 50}, 25.0)  # lagging since 25
    stalled = group(20.0, {TP0: 30, TP1: 5})
    ends = {TP0: 40, TP1: 50}
    expected = old.evaluate(stalled, ends, 26.0, err_after=3)
    assert (expected.status, expected.complete) == (Status.STALL, 1.0)

    new = CommitWindows(window=3, stop_after=300.0)
    assert not new.knows("g1")
    new.seed("g1", old.window_of("g1"))
    assert new.knows("g1")
    assert new.evaluate(stalled, ends, 26.0, err_after=3) == expected
    assert new.evaluate(stalled, ends, 326.0, err_after=3).status is Status.STOP  # P2 carried
    fresh = CommitWindows(window=3, stop_after=300.0)
    fresh.sample(stalled, ends, 26.0)
    assert fresh.evaluate(stalled, ends, 26.0, err_after=3).complete == 0.0

    new.sample(group(30.0, {TP0: 40, TP1: 6}), {TP0: 40, TP1: 50}, 30.0)
    assert [s.at for s in new.samples("g1")] == [10.0, 20.0, 30.0]  # bounded, in order
    # A group with a window of its own keeps it.
    new.seed("g1", CommitWindows(window=3).window_of("g1"))
    assert [s.at for s in new.samples("g1")] == [10.0, 20.0, 30.0]


def test_severity_lists_every_status_once() -> None:
    assert sorted(SEVERITY, key=lambda s: s.value) == sorted(Status, key=lambda s: s.value)
    with pytest.raises(ValueError, match="at least 2"):
        CommitWindows(window=1)
