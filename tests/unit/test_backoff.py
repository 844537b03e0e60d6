"""The one retry rule (``core.backoff``): the wait grows by ``factor`` from ``initial`` to
``cap``, and jitter only ever shortens it."""

from __future__ import annotations

import pytest

from spark_offset_sidecar.adapters.child_process import RESTART_BACKOFF
from spark_offset_sidecar.adapters.kafka.admin import NOT_YET_BACKOFF
from spark_offset_sidecar.adapters.kafka.committer import UNREACHABLE_BACKOFF
from spark_offset_sidecar.adapters.sql.change_notices import RECONNECT_BACKOFF
from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.settings import Settings


def test_doubles_from_initial_to_cap() -> None:
    backoff = Backoff(initial=0.5, cap=10.0)
    assert [backoff.delay(n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert backoff.delay(0) == 0.5  # no failure yet counts as the first


def test_factor() -> None:
    assert [Backoff(initial=1, cap=100, factor=3).delay(n) for n in (1, 2, 3, 5)] == [
        1,
        3,
        9,
        81,
    ]
    assert Backoff(initial=2, cap=100, factor=1).delay(50) == 2


def test_hours_of_failures_stay_at_the_cap() -> None:
    assert Backoff(initial=0.1, cap=0.5).delay(5000) == 0.5  # 2.0**4999 overflows


def test_jitter_shortens_by_at_most_its_share() -> None:
    draws = iter([0.0, 0.5, 1.0])
    backoff = Backoff(initial=4, cap=4, jitter=0.5, random=lambda: next(draws))
    assert [backoff.delay(1) for _ in range(3)] == [4, 3, 2]


def test_jitter_never_passes_the_cap() -> None:
    backoff = Backoff(initial=1, cap=8, jitter=1.0)  # the real random source
    waits = [backoff.delay(n) for n in range(1, 200)]
    assert all(0 <= w <= 8 for w in waits)
    assert len(set(waits)) > 1


@pytest.mark.parametrize(
    "given",
    [
        {"initial": 0, "cap": 1},
        {"initial": 2, "cap": 1},
        {"initial": 1, "cap": 2, "factor": 0.5},
        {"initial": 1, "cap": 2, "jitter": 1.5},
    ],
)
def test_refuses_what_is_no_backoff(given: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="not a backoff"):
        Backoff(**given)


def test_the_waits_the_manual_promises() -> None:
    """docs/run/processes.md: a child is started again after 1 s, doubling to 30 s;
    docs/run/service.md: a failed commit after SIDECAR_RETRY_INITIAL_SECONDS (0.5),
    doubled each time up to SIDECAR_RETRY_MAX_SECONDS (10)."""
    assert [RESTART_BACKOFF.delay(n) for n in (1, 2, 6, 7)] == [1, 2, 30, 30]
    commits = Settings().commits
    assert (commits.retry_initial_seconds, commits.retry_max_seconds) == (0.5, 10.0)
    # Not in the manual, kept as they were: reconnects to PostgreSQL, Kafka's "not yet".
    assert (RECONNECT_BACKOFF.initial, RECONNECT_BACKOFF.cap) == (0.5, 10.0)
    assert (NOT_YET_BACKOFF.initial, NOT_YET_BACKOFF.cap) == (0.1, 1.0)
    assert (UNREACHABLE_BACKOFF.initial, UNREACHABLE_BACKOFF.cap) == (0.1, 0.5)
    for backoff in (RESTART_BACKOFF, RECONNECT_BACKOFF, NOT_YET_BACKOFF, UNREACHABLE_BACKOFF):
        assert (backoff.factor, backoff.jitter) == (2.0, 0.0)
