"""Each partition's leader from topic metadata read without side effects (``wire``'s
Metadata requests never create a topic: on a broker with ``auto.create.topics.enable``, a
lag read of a deleted topic would bring it back, and a read-only
``GET .../starting-offsets?topic=typo`` would create ``typo`` in a shared cluster)."""

from __future__ import annotations

from typing import Any

from spark_offset_sidecar.core.offsets import TopicPartition


def partition_leaders(topics: list[Any]) -> tuple[dict[TopicPartition, int], set[str]]:
    """Each partition's leader (-1: none now), and the topics Kafka answered with an
    error (unknown, not authorized, ...), from ``wire``'s topic metadata."""
    leaders: dict[TopicPartition, int] = {}
    failed: set[str] = set()
    for topic in topics:
        name = topic["topic"]
        if topic["error_code"] != 0:
            failed.add(name)
            continue
        for partition in topic["partitions"]:
            leaders[TopicPartition(name, partition["partition"])] = partition["leader"]
    return leaders, failed
