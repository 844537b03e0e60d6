"""A group's commit phase and the events that move it: the transition table as data.

A group's phase follows from (slot, commit in flight). The ledger checks each change that
is one of these events against ``TRANSITIONS`` as it applies it: one the table does not
allow ('-': refused there, or cannot occur) raises ``errors.TransitionError``, a bug in the
ledger. The replica merge (R11) and rollbacks (R10) put a stored or earlier state back:
they are not events of the table.

``table()`` prints it (a test keeps this copy the same):

  phase \\ event   COMPLETE        TAKE       SUCCESS  FAILURE  FAILURE_OWNER_GONE  RELEASE
  IDLE            READY           IN_FLIGHT  -        -        -                   IDLE
  READY           READY           IN_FLIGHT  -        -        -                   IDLE
  IN_FLIGHT       IN_FLIGHT_NEXT  -          IDLE     READY    IDLE                IN_FLIGHT
  IN_FLIGHT_NEXT  IN_FLIGHT_NEXT  -          READY    READY    READY               IN_FLIGHT
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NoReturn

from spark_offset_sidecar.core.ledger.state import GroupPhase, GroupState
from spark_offset_sidecar.errors import TransitionError


class Event(enum.Enum):
    COMPLETE = "complete"  # a checkpoint completed: it fills the slot (R5)
    TAKE = "take"  # the slot, or the last offsets again (R9, R12), handed out (R6)
    SUCCESS = "success"  # of the commit in flight (R8)
    FAILURE = "failure"  # of the commit in flight, its query still the owner (R8)
    FAILURE_OWNER_GONE = "failure, owner gone"  # of the commit in flight, its query released
    # or the group taken over since
    RELEASE = "release"  # the owning query released: its slot dropped


IDLE, READY = GroupPhase.IDLE, GroupPhase.READY
IN_FLIGHT, IN_FLIGHT_NEXT = GroupPhase.IN_FLIGHT, GroupPhase.IN_FLIGHT_NEXT

TRANSITIONS: Mapping[tuple[GroupPhase, Event], GroupPhase] = {
    (IDLE, Event.COMPLETE): READY,
    (READY, Event.COMPLETE): READY,  # the slot replaced, counted skipped
    (IN_FLIGHT, Event.COMPLETE): IN_FLIGHT_NEXT,
    (IN_FLIGHT_NEXT, Event.COMPLETE): IN_FLIGHT_NEXT,  # the slot replaced, counted skipped
    (IDLE, Event.TAKE): IN_FLIGHT,  # only a refresh (R9) or a repair (R12)
    (READY, Event.TAKE): IN_FLIGHT,
    (IN_FLIGHT, Event.SUCCESS): IDLE,
    (IN_FLIGHT_NEXT, Event.SUCCESS): READY,
    (IN_FLIGHT, Event.FAILURE): READY,  # retried after backoff
    (IN_FLIGHT_NEXT, Event.FAILURE): READY,  # the failed one dropped: the newer supersedes
    (IN_FLIGHT, Event.FAILURE_OWNER_GONE): IDLE,
    (IN_FLIGHT_NEXT, Event.FAILURE_OWNER_GONE): READY,
    (IDLE, Event.RELEASE): IDLE,
    (READY, Event.RELEASE): IDLE,
    (IN_FLIGHT, Event.RELEASE): IN_FLIGHT,  # its result still arrives
    (IN_FLIGHT_NEXT, Event.RELEASE): IN_FLIGHT,
}


# On the event path a phase is its index in PHASES (``index``), and each event's column of
# the table a tuple of those indexes (``column``; -1: none): no enum is hashed or built.
PHASES = (IDLE, READY, IN_FLIGHT, IN_FLIGHT_NEXT)


def index(group: GroupState) -> int:
    """``PHASES.index(group.phase)``, cheaply."""
    return (2 if group.in_flight is not None else 0) + (group.slot is not None)


def column(event: Event) -> tuple[int, ...]:
    """``event``'s column of ``TRANSITIONS``: the index each phase goes to, -1 for none."""
    moves = (TRANSITIONS.get((phase, event)) for phase in PHASES)
    return tuple(-1 if to is None else PHASES.index(to) for to in moves)


def check(before: GroupPhase, event: Event, after: GroupPhase) -> None:
    """Raise unless ``TRANSITIONS`` takes ``before`` to ``after`` on ``event``."""
    allowed = TRANSITIONS.get((before, event))
    if allowed is not after:
        raise TransitionError(
            f"commit phase {before.name} on event {event.name}: "
            + ("refused there" if allowed is None else f"goes to {allowed.name}")
            + f", not {after.name}"
        )


def refused(event: Event, before: int, group: GroupState) -> NoReturn:
    """Raise: ``event`` took ``group`` from ``PHASES[before]`` where its column says not."""
    check(PHASES[before], event, group.phase)
    raise TransitionError(f"{event.name}'s column of the table differs from the table")


def table() -> str:
    """``TRANSITIONS`` as a text table, phases down, events across ('-': none)."""
    rows = [["phase \\ event", *(e.name for e in Event)]]
    for phase in GroupPhase:
        cells = (TRANSITIONS.get((phase, e)) for e in Event)
        rows.append([phase.name, *(c.name if c else "-" for c in cells)])
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    return "\n".join(
        "".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
