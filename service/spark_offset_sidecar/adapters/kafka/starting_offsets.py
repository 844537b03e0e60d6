"""Disaster recovery: the ``startingOffsets`` that restarts a Spark query exactly where its
consumer group's committed offsets stand, read from Kafka itself (what lag tools see and
what survived). Spark requires *every* partition of its topics in a specific
``startingOffsets``: a partition without a committed offset gets -2 (earliest), so that
no record is lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spark_offset_sidecar.adapters.kafka.admin import GroupAdmin
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import OffsetsNotFound
from spark_offset_sidecar.ports.kafka import StartingOffsets

EARLIEST = -2


async def starting_offsets(
    client_options: Mapping[str, Any],
    group_id: str,
    topics: Sequence[str] = (),
    *,
    request_timeout: float = 10.0,
) -> StartingOffsets:
    """``client_options``: aiokafka's connection keywords (``kafka_client_options``); with
    them and ``request_timeout`` bound, the ``StartingOffsetsReader`` port."""
    async with GroupAdmin(client_options, request_timeout=request_timeout) as admin:
        committed = await admin.committed(group_id)
        wanted = sorted(set(topics) or {tp.topic for tp in committed})
        if not wanted:
            raise OffsetsNotFound(
                f"Kafka returned no committed offsets for group {group_id!r}; an empty "
                "answer is not taken to mean 'start from nothing' (name the topics to "
                "start them at earliest)"
            )
        described = await admin.partitions(wanted)
    offsets: dict[str, dict[str, int]] = {}
    uncommitted: list[str] = []
    for name in wanted:
        partitions = described.get(name)
        if not partitions:
            raise OffsetsNotFound(f"topic {name!r} is unknown to Kafka: no offsets to start from")
        for partition in partitions:
            found = committed.get(TopicPartition(name, partition))
            if found is None:
                uncommitted.append(f"{name}/{partition}")
            offset = EARLIEST if found is None else found.offset
            offsets.setdefault(name, {})[str(partition)] = offset
    return StartingOffsets(group_id, offsets, uncommitted)
