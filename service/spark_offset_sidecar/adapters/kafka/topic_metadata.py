"""Topic metadata read without side effects: every Metadata request of this project.

aiokafka's ``MetadataRequest`` allows topic auto-creation unless told otherwise (v4+; read
in aiokafka 0.14's source), and so do the consumer's ``end_offsets`` and the admin
client's ``describe_topics``. On a broker with ``auto.create.topics.enable`` (Kafka's
default), naming a topic that does not exist would create it: a lag read of a deleted
topic would bring it back, and a read-only ``GET .../starting-offsets?topic=typo`` would
create ``typo`` in a shared cluster. Hence one request, auto-creation off.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiokafka.protocol.metadata import MetadataRequest

from spark_offset_sidecar.core.offsets import TopicPartition


def metadata_request(topics: Iterable[str]) -> MetadataRequest:
    """A Metadata request for ``topics`` that never creates one."""
    return MetadataRequest(sorted(topics), allow_auto_topic_creation=False)


def partition_leaders(response: Any) -> tuple[dict[TopicPartition, int], set[str]]:
    """Each partition's leader (-1: none now), and the topics Kafka answered with an
    error (unknown, not authorized, ...), from a Metadata response."""
    leaders: dict[TopicPartition, int] = {}
    failed: set[str] = set()
    for topic in response.to_object()["topics"]:
        name = topic.get("topic", topic.get("name"))
        if topic["error_code"] != 0:
            failed.add(name)
            continue
        for partition in topic["partitions"]:
            leaders[TopicPartition(name, partition["partition"])] = partition["leader"]
    return leaders, failed
