"""R13 commit interval: a group's slot is taken at most once per interval, the newest
offsets are the ones committed, superseded checkpoints are counted exactly, a group's own
interval overrides the default, and a shutdown flushes what waits for the interval."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_offset_sidecar.core.ledger.changes import Outcome
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition

T0 = TopicPartition("t", 0)


def complete(ledger: Ledger, batch: int, now: float, group: str = "g") -> None:
    decision = ledger.decide_progress(f"q-{group}", group, "r", batch, {T0: batch}, now)
    assert decision.outcome is Outcome.ACCEPTED
    ledger.apply(decision)


def succeed(ledger: Ledger, group: str, now: float) -> int:
    request = ledger.take(group, now)
    assert request is not None
    ledger.apply_change(ledger.commit_result(request, now))
    return request.offsets[T0]


def test_interval_zero_takes_every_checkpoint_at_once() -> None:
    ledger = Ledger()
    for batch in range(3):
        complete(ledger, batch, now=batch * 0.1)
        assert succeed(ledger, "g", now=batch * 0.1) == batch
    assert ledger.groups["g"].counters.skipped == 0


def test_within_the_interval_the_slot_waits_and_keeps_the_newest() -> None:
    ledger = Ledger(commit_interval=1.0)
    complete(ledger, 0, now=0.0)
    assert succeed(ledger, "g", now=0.0) == 0, "the first commit does not wait"
    for batch in range(1, 6):  # five completions within the interval
        complete(ledger, batch, now=0.1 * batch)
        assert ledger.ready_groups(0.1 * batch) == []
        assert ledger.take("g", 0.1 * batch) is None
    assert ledger.next_retry_at() == 1.0, "the committer wakes when the interval ends"
    assert ledger.ready_groups(1.0) == ["g"]
    assert succeed(ledger, "g", now=1.0) == 5, "the newest offsets"
    assert ledger.groups["g"].counters.skipped == 4, "superseded ones, exactly"


def test_a_groups_own_interval_overrides_the_default_and_none_restores_it() -> None:
    ledger = Ledger(commit_interval=10.0)
    complete(ledger, 0, now=0.0)
    succeed(ledger, "g", now=0.0)
    decision = ledger.decide_commit_interval("g", 0.5)
    assert decision.outcome is Outcome.ACCEPTED
    ledger.apply(decision)
    complete(ledger, 1, now=0.1)
    assert ledger.take("g", 0.4) is None
    assert succeed(ledger, "g", now=0.5) == 1
    ledger.apply(ledger.decide_commit_interval("g", None))
    complete(ledger, 2, now=0.6)
    assert ledger.take("g", 5.0) is None, "back to the default: 10 s after 0.5"
    assert ledger.ready_at(ledger.groups["g"]) == 10.5


def test_an_unknown_group_is_refused() -> None:
    decision = Ledger().decide_commit_interval("nobody", 1.0)
    assert decision.outcome is Outcome.UNKNOWN_QUERY
    assert decision.changes == ()


def test_a_shutdown_flushes_what_waits_for_the_interval_only() -> None:
    ledger = Ledger(commit_interval=60.0)
    for group in ("a", "b"):
        complete(ledger, 0, now=0.0, group=group)
        succeed(ledger, group, now=0.0)
        complete(ledger, 1, now=1.0, group=group)
    failing = ledger.take("b", 0.0, flush=True)
    assert failing is not None
    ledger.apply_change(ledger.commit_result(failing, 1.0, "timeout"))  # b: retry later
    assert ledger.waiting_for_interval(1.0) == ["a"]
    request = ledger.take("a", 1.0, flush=True)
    assert request is not None
    assert request.offsets == {T0: 1}


def test_a_failed_commit_is_retried_after_its_backoff_and_the_interval() -> None:
    ledger = Ledger(commit_interval=2.0)
    complete(ledger, 0, now=0.0)
    request = ledger.take("g", 0.0)
    assert request is not None
    ledger.apply_change(ledger.commit_result(request, 0.1, "timeout"))  # backoff 0.5 s
    assert ledger.take("g", 0.7) is None, "backoff passed, the interval not"
    assert ledger.take("g", 2.0) is not None


@given(
    interval=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
    gaps=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=60),
    seed=st.integers(0, 2**16),
)
def test_at_most_one_commit_per_interval_and_the_last_offsets_always_land(
    interval: float, gaps: list[float], seed: int
) -> None:
    """Completions at any times, the committer polling at random moments: commits of a
    group are at least one interval apart; every completion is committed or counted
    skipped; once events stop, the newest offsets are committed within the interval."""
    rng = random.Random(seed)
    ledger = Ledger(commit_interval=interval)
    now, taken_at, committed = 0.0, [], None
    for batch, gap in enumerate(gaps):
        now += gap
        complete(ledger, batch, now)
        if rng.random() < 0.7 and "g" in ledger.ready_groups(now):
            taken_at.append(now)
            committed = succeed(ledger, "g", now)
    wake = ledger.next_retry_at()
    if wake is not None:  # the committer wakes up then and takes the rest
        assert wake <= now + interval + 1e-9
        assert ledger.ready_groups(max(wake, now)) == ["g"]
        taken_at.append(max(wake, now))
        committed = succeed(ledger, "g", max(wake, now))
    assert committed == len(gaps) - 1, "the newest offsets landed"
    assert all(b - a >= interval - 1e-9 for a, b in itertools.pairwise(taken_at))
    counters = ledger.groups["g"].counters
    assert counters.succeeded + counters.skipped == len(gaps)


@pytest.mark.parametrize("interval", [0.0, 1.0])
def test_a_savepoint_rollback_keeps_the_interval_timing(interval: float) -> None:
    ledger = Ledger(commit_interval=interval)
    complete(ledger, 0, now=0.0)
    succeed(ledger, "g", now=0.0)
    decision = ledger.decide_commit_interval("g", 5.0)
    savepoint = ledger.savepoint(decision)
    ledger.apply(decision)
    ledger.rollback(savepoint)
    assert ledger.groups["g"].commit_interval is None
    assert ledger.groups["g"].interval_from == 0.0, "the take at 0.0 stands"
