"""A reference model of Flink's commit-on-checkpoint, for differential tests of the ledger.

Mirrors FlinkKafkaConsumerBase (``pendingOffsetsToCommit``: a LinkedMap in insertion order,
at most MAX_NUM_PENDING_CHECKPOINTS, ``notifyCheckpointComplete`` drops the entry and all
before it) and KafkaConsumerThread (``nextOffsetsToCommit``: an AtomicReference slot,
``commitInProgress``: one ``commitAsync`` at a time, counters of succeeded/failed commits).

Left out on purpose: Flink's +1 (its state holds the last processed offset; Spark's end
offset already is the next one to read, so both sides here carry next-to-read offsets).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Offsets = dict[tuple[str, int], int]
MAX_NUM_PENDING_CHECKPOINTS = 100


@dataclass
class FlinkConsumer:
    max_pending: int = MAX_NUM_PENDING_CHECKPOINTS
    pending: dict[int, Offsets] = field(default_factory=dict)  # LinkedMap: insertion order
    next_offsets_to_commit: tuple[int, Offsets] | None = None  # the AtomicReference
    commit_in_progress: tuple[int, Offsets] | None = None
    committed: Offsets = field(default_factory=dict)  # what the broker holds
    commits_succeeded: int = 0
    commits_failed: int = 0
    skipped: int = 0  # "Committing offsets to Kafka takes longer than the checkpoint interval"
    unknown_completions: int = 0

    def snapshot_state(self, checkpoint_id: int, offsets: Offsets) -> None:
        self.pending[checkpoint_id] = dict(offsets)
        while len(self.pending) > self.max_pending:
            del self.pending[next(iter(self.pending))]

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        ids = list(self.pending)
        if checkpoint_id not in ids:
            self.unknown_completions += 1  # "Received confirmation for unknown checkpoint id"
            return
        position = ids.index(checkpoint_id)
        offsets = self.pending[checkpoint_id]
        for old in ids[: position + 1]:
            del self.pending[old]
        if not offsets:
            return
        # fetcher.commitInternalOffsetsToKafka -> KafkaConsumerThread.setOffsetsToCommit
        if self.next_offsets_to_commit is not None:
            self.skipped += 1
        self.next_offsets_to_commit = (checkpoint_id, offsets)

    def run_loop_iteration(self) -> tuple[int, Offsets] | None:
        """KafkaConsumerThread.run: start commitAsync when none is in progress."""
        if self.commit_in_progress is not None or self.next_offsets_to_commit is None:
            return None
        self.commit_in_progress, self.next_offsets_to_commit = self.next_offsets_to_commit, None
        return self.commit_in_progress

    def on_commit_complete(self, success: bool) -> None:
        assert self.commit_in_progress is not None
        _, offsets = self.commit_in_progress
        self.commit_in_progress = None
        if success:
            self.committed.update(offsets)
            self.commits_succeeded += 1
        else:
            self.commits_failed += 1  # no retry: "the next checkpoint will fix it"
