"""The transition table (``core.ledger.transitions``) against the ledger's behaviour: for
every (phase, event) pair, a group put in that phase through the ledger's public methods
meets the event and ends in the phase the table names, or ('-') the event is refused or
cannot occur and the phase stays."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest

from spark_offset_sidecar.core.ledger import transitions
from spark_offset_sidecar.core.ledger.changes import CommitStarted
from spark_offset_sidecar.core.ledger.rules import GroupPhase, Ledger
from spark_offset_sidecar.core.ledger.transitions import (
    PHASES,
    TRANSITIONS,
    Event,
    check,
    index,
    table,
)
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import TransitionError

G = "g"
NOW = 1000.0  # past every retry time, interval and refresh


def progress(ledger: Ledger, query: str, batch: int) -> None:
    offsets = {TopicPartition("t", 0): batch}
    ledger.apply(ledger.decide_progress(query, G, "run", batch, offsets, float(batch)))


def release(ledger: Ledger, query: str) -> None:
    ledger.apply(ledger.decide_release(query))


def in_phase(phase: GroupPhase, *, owner_gone: bool = False) -> Ledger:
    """A ledger whose group ``G`` is in ``phase``, owned by "q" (``owner_gone``: the commit
    in flight, if any, is of "q", which no longer owns the group)."""
    ledger = Ledger(refresh_after=10.0)
    progress(ledger, "q", 1)
    first = ledger.take(G, 1.0)
    assert first is not None
    ledger.apply_change(ledger.commit_result(first, 1.0))  # IDLE, with committed offsets
    if phase in (GroupPhase.IN_FLIGHT, GroupPhase.IN_FLIGHT_NEXT):
        progress(ledger, "q", 2)
        assert ledger.take(G, 2.0) is not None
    if owner_gone:
        release(ledger, "q")
    owner = "q2" if owner_gone else "q"
    if phase in (GroupPhase.READY, GroupPhase.IN_FLIGHT_NEXT):
        progress(ledger, owner, 3)
    assert ledger.groups[G].phase is phase
    assert PHASES[index(ledger.groups[G])] is phase  # the event path's cheap phase
    return ledger


def owner(ledger: Ledger) -> str:
    query = ledger.groups[G].query_id
    assert query is not None
    return query


def complete(ledger: Ledger) -> bool:
    query = owner(ledger)
    ledger.apply(ledger.decide_snapshot(query, G, 9, "run", {TopicPartition("t", 0): 9}, NOW))
    ledger.apply(ledger.decide_complete(query, 9, NOW))
    return True


def take(ledger: Ledger) -> bool:
    return ledger.take(G, NOW) is not None


def result(failure: str | None) -> Callable[[Ledger], bool]:
    def fire(ledger: Ledger) -> bool:
        request = ledger.groups[G].in_flight
        if request is None:
            return False  # no commit in flight: no result can come
        ledger.apply_change(ledger.commit_result(request, NOW, failure))
        return True

    return fire


def release_owner(ledger: Ledger) -> bool:
    release(ledger, owner(ledger))
    return True


FIRE: dict[Event, Callable[[Ledger], bool]] = {
    Event.COMPLETE: complete,
    Event.TAKE: take,
    Event.SUCCESS: result(None),
    Event.FAILURE: result("boom"),
    Event.FAILURE_OWNER_GONE: result("boom"),
    Event.RELEASE: release_owner,
}


@pytest.mark.parametrize("event", list(Event), ids=lambda e: e.name)
@pytest.mark.parametrize("phase", list(GroupPhase), ids=lambda p: p.name)
def test_every_phase_meets_every_event_as_the_table_says(phase: GroupPhase, event: Event) -> None:
    ledger = in_phase(phase, owner_gone=event is Event.FAILURE_OWNER_GONE)
    fired = FIRE[event](ledger)
    expected = TRANSITIONS.get((phase, event))
    if expected is None:  # '-': refused, or it cannot occur; nothing moved
        assert not fired
        assert ledger.groups[G].phase is phase
    else:
        assert fired
        assert ledger.groups[G].phase is expected


def test_an_idle_group_with_no_refresh_due_is_not_taken() -> None:
    ledger = in_phase(GroupPhase.IDLE)
    assert ledger.take(G, 2.0) is None  # its last commit, at 1.0, is not 10 s old
    assert ledger.groups[G].phase is GroupPhase.IDLE


def test_a_change_the_table_refuses_raises_naming_phase_and_event() -> None:
    ledger = in_phase(GroupPhase.IN_FLIGHT)
    request = ledger.groups[G].in_flight
    assert request is not None
    with pytest.raises(TransitionError, match="IN_FLIGHT on event TAKE: refused"):
        ledger.apply_change(CommitStarted(request))  # a second commit in flight (R6)


def test_a_change_to_another_phase_than_the_table_names_raises() -> None:
    check(GroupPhase.IDLE, Event.COMPLETE, GroupPhase.READY)
    with pytest.raises(TransitionError, match="IDLE on event COMPLETE: goes to READY"):
        check(GroupPhase.IDLE, Event.COMPLETE, GroupPhase.IN_FLIGHT)


def test_the_table_reads_as_the_data_and_the_docstring_shows_it() -> None:
    assert textwrap.indent(table(), "  ") in (transitions.__doc__ or "")
    lines = table().splitlines()
    assert len(lines) == 1 + len(GroupPhase)
    for phase, line in zip(GroupPhase, lines[1:], strict=True):
        cells = [TRANSITIONS[phase, e].name if (phase, e) in TRANSITIONS else "-" for e in Event]
        assert line.split() == [phase.name, *cells]
