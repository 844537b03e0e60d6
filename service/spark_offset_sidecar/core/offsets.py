"""Kafka positions as the ledger sees them, and their Spark-shaped JSON form
(``{"topic": {"0": 42}}``). An offset is the *next offset to read*: Spark's ``endOffset``,
committed as is (Flink adds 1 because its state holds the last processed offset)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

# Kafka's protocol: a partition id is an int32 >= 0, an offset (and so a batch id, which
# is stored beside offsets) an int64 >= 0. Anything else could never be committed.
MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __reduce__(self) -> tuple[Callable[[str, int], TopicPartition], tuple[str, int]]:
        """Unpickled as its process's shared object (``shared_partition``): a watcher told
        a fleet's offsets holds one object per partition, not one per group."""
        return shared_partition, (self.topic, self.partition)


# One object per partition for the whole process, which the cyclic collector scans once
# however many groups read it. Bounded, as any caller may name partitions: past
# ``SHARED_MAX`` (more than a big Kafka cluster has) new ones are equal, merely not shared.
SHARED_MAX = 100_000
_shared: dict[tuple[str, int], TopicPartition] = {}  # keyed by equal plain tuples too


def shared_partition(topic: str, partition: int) -> TopicPartition:
    """``TopicPartition(topic, partition)``, the same object each time it is asked for."""
    found = _shared.get((topic, partition))  # a plain tuple: equal, hashed alike, not built
    if found is not None:
        return found
    made = TopicPartition(topic, partition)
    if len(_shared) < SHARED_MAX:
        _shared[made] = made
    return made


OffsetMap = Mapping[TopicPartition, int]
OffsetJson = dict[str, dict[str, int]]


def to_json(offsets: OffsetMap) -> OffsetJson:
    nested: OffsetJson = {}
    for tp in sorted(offsets):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return nested


def from_json(nested: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The flat map of an already validated nested map."""
    return {
        shared_partition(topic, int(partition)): offset
        for topic, partitions in nested.items()
        for partition, offset in partitions.items()
    }


def describe(offsets: OffsetMap) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}@{offsets[tp]}" for tp in sorted(offsets))
