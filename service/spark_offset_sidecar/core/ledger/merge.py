"""How a replica's memory takes in a group as the shared store holds it (ledger R11).

Pure, like the ledger. With several replicas on one database, events on a group may be
decided by any replica, and only the group's owner commits it. Each replica's memory is
therefore a cache of the store for what events decided, and the truth for what is its
own: the commit in flight, its retry timing, its counters.

Rules, for a group's stored row ``stored`` and memory's ``mine``:
  M1 owner, rewind  The stored query, rewind permission and commit interval stand (a rewind
                    already handed to the commit in flight is not handed out again).
  M2 committed      The newer of the two committed offsets stands: memory may be ahead of
                    the store (a success whose write failed, ledger R8), never behind it
                    once merged.
  M3 slot           The stored slot stands, except that it is
                    - dropped when it is the commit in flight, or is already committed;
                    - kept with memory's retry timing when memory holds the same entry;
                    - else new to memory: a completion another replica decided, which
                      starts with no failures (ledger R5).
"""

from __future__ import annotations

from spark_offset_sidecar.core.ledger.changes import Checkpoint
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState


def merge_group(mine: GroupState | None, stored: GroupState) -> GroupState:
    if mine is None:
        return stored
    merged = mine.copy()
    flying = mine.in_flight
    merged.query_id = stored.query_id  # M1
    merged.rewind_allowed = stored.rewind_allowed and not (flying is not None and flying.rewind)
    merged.commit_interval = stored.commit_interval
    merged.cluster = stored.cluster
    merged.committed = newer(mine.committed, stored.committed)  # M2
    slot = stored.slot  # M3
    in_flight = flying is not None and _same(slot, flying.checkpoint) if slot else False
    if slot is None or in_flight or _committed(slot, merged.committed):
        merged.slot = None
    elif mine.slot is not None and _same(slot, mine.slot):
        merged.slot = mine.slot
    else:
        merged.slot, merged.failures, merged.retry_at = slot, 0, 0.0
    return merged


def _same(a: Checkpoint, b: Checkpoint) -> bool:
    return a.query_id == b.query_id and a.checkpoint_id == b.checkpoint_id


def _committed(slot: Checkpoint, committed: CommittedOffsets | None) -> bool:
    return (
        committed is not None
        and committed.query_id == slot.query_id
        and committed.checkpoint_id >= slot.checkpoint_id
    )


def newer(a: CommittedOffsets | None, b: CommittedOffsets | None) -> CommittedOffsets | None:
    """M2: the later of two commits of a group (either when the other is None)."""
    if a is None or b is None:
        return a or b
    return a if a.at >= b.at else b
