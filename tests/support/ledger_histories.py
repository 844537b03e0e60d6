"""Random event histories for property tests of the ledger and of what it writes."""

from __future__ import annotations

from hypothesis import strategies as st

from spark_offset_sidecar.core.ledger.changes import Change, Decision
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition

Step = tuple[int, int, int, int, int]  # (kind, query, group, checkpoint id, offset)
QUERIES = ("q0", "q1", "q2")
GROUPS = ("g0", "g1", "g2")


def histories(max_size: int) -> st.SearchStrategy[list[Step]]:
    return st.lists(
        st.tuples(
            st.integers(0, 9),
            st.integers(0, 2),
            st.integers(0, 2),
            st.integers(0, 12),
            st.integers(0, 50),
        ),
        max_size=max_size,
    )


commit_patterns = st.lists(st.booleans(), min_size=1, max_size=8)


def event(ledger: Ledger, step: Step, now: float) -> Decision:
    """The decision on one event drawn as ``step``."""
    kind, q, g, checkpoint_id, offset = step
    query, group = QUERIES[q], GROUPS[g]
    offsets = {TopicPartition("t", 0): offset, TopicPartition("t", 1): offset + 1}
    if kind <= 3:
        return ledger.decide_progress(query, group, "run", checkpoint_id, offsets, now)
    if kind <= 5:
        return ledger.decide_snapshot(query, group, checkpoint_id, "run", offsets, now)
    if kind <= 7:
        return ledger.decide_complete(query, checkpoint_id, now)
    if kind == 8:
        return ledger.decide_release(query)
    return ledger.decide_allow_rewind(group)


def run(ledger: Ledger, history: list[Step], commits: list[bool]) -> list[Change]:
    """Apply ``history`` directly, taking commits and finishing some (successes and
    failures, as ``commits`` says) along the way; every change applied, in order."""
    changes: list[Change] = []
    for i, step in enumerate(history):
        now = float(i)
        decision = event(ledger, step, now)
        ledger.apply(decision)
        changes.extend(decision.changes)
        for group_id in ledger.ready_groups(now):
            request = ledger.take(group_id, now)
            if request is not None and commits[i % len(commits)]:
                failure = None if commits[(i + 1) % len(commits)] else "timeout"
                result = ledger.commit_result(request, now, failure)
                ledger.apply_change(result)
                changes.append(result)
    return changes
