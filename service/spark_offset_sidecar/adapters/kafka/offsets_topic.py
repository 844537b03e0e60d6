"""Where Kafka keeps a group's commits: one partition of ``__consumer_offsets``, whose
leader coordinates the group. While a replica of it is in its ISR but dead, every commit
of every group on it waits (acks=all), so the committer keeps the groups of other
partitions on other connections. A group's partition, as Kafka 3.9-4.4 computes it
(``GroupCoordinatorService.partitionFor`` / ``Utils.abs``):
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
