"""How a replica's memory takes in the shared store's rows, and which groups it commits
(ledger R11).

  R11 replicas   With several replicas on one database, stored rows are the truth for what
                 events decided: ``refresh`` replaces memory's queries and groups with them
                 before deciding on them and when another replica changed them; what is
                 this replica's own (commit in flight, retry timing, counters) stays
                 (``merge_group``). A replica takes only the groups it owns
                 (``commit_only``, ``core.ledger.retries``).

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

from collections.abc import Callable, Iterable

from spark_offset_sidecar.core.ledger.changes import Checkpoint
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState, QueryState


class Replica:
    """This replica's memory of ``queries`` and ``groups`` refreshed from the store;
    ``update`` reindexes a group replaced or removed."""

    def __init__(
        self,
        queries: dict[str, QueryState],
        groups: dict[str, GroupState],
        update: Callable[[str], None],
    ) -> None:
        self._queries = queries
        self._groups = groups
        self._update = update

    def refresh(
        self,
        query_ids: Iterable[str],
        group_ids: Iterable[str],
        queries: Iterable[QueryState],
        groups: Iterable[GroupState],
    ) -> None:
        """The store's rows for ``query_ids`` and ``group_ids`` (those not among ``queries``
        / ``groups`` are not stored). Only between batches: no savepoint open."""
        stored_queries = {q.query_id: q for q in queries}
        for query_id in query_ids:
            if query_id in stored_queries:
                self._queries[query_id] = stored_queries[query_id]
            else:
                self._queries.pop(query_id, None)
        stored_groups = {g.group_id: g for g in groups}
        for group_id in group_ids:
            stored, mine = stored_groups.get(group_id), self._groups.get(group_id)
            if stored is not None:
                self._groups[group_id] = merge_group(mine, stored)
                self._update(group_id)
            elif mine is not None and mine.in_flight is None:
                del self._groups[group_id]
                self._update(group_id)


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
