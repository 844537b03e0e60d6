"""Where Kafka keeps a group's commits: one partition of ``__consumer_offsets``.

A group's coordinator is the leader of that partition, and its commits are appended to it
with acks=all: while a replica of the partition is in its ISR but dead (until Kafka fences
the broker, ``broker.session.timeout.ms``), every commit of every group on the partition
waits, whichever broker coordinates it. Groups on other partitions are not concerned; the
committer keeps them on other connections (the broker answers a connection's requests one
at a time, in order), which needs each group's partition, known here without asking Kafka
(Kafka 3.9-4.4, ``GroupCoordinatorService.partitionFor`` / ``Utils.abs``):
``abs(groupId.hashCode()) % partitions``, with ``abs(Integer.MIN_VALUE)`` taken as 0."""

from __future__ import annotations

from aiokafka import errors as kafka_errors

from spark_offset_sidecar.adapters.kafka.wire import Client

OFFSETS_TOPIC = "__consumer_offsets"
_INT_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for(group: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` (of ``partitions``) that holds ``group``."""
    value = java_string_hash(group)
    return (0 if value == _INT_MIN else abs(value)) % partitions


async def partition_count(client: Client, coordinator: int) -> int | str:
    """How many partitions ``__consumer_offsets`` has, asked of a group's ``coordinator``
    (it leads one of them, so its metadata has the topic); or why Kafka does not say
    (the principal may not describe it; a Kafka-compatible service without the topic,
    such as Azure Event Hubs). Raises what reaching the broker raises."""
    for topic in await client.metadata([OFFSETS_TOPIC], coordinator):
        code = topic["error_code"]
        if code == 0 and topic["partitions"]:
            return len(topic["partitions"])
        return f"{kafka_errors.for_code(code).__name__} for {OFFSETS_TOPIC}"
    return f"no metadata for {OFFSETS_TOPIC}"
