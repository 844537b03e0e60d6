"""A consumer group as ``kafka-consumer-groups.sh --describe`` shows it, read from Kafka
itself with the admin client (committed offsets) and ListOffsets (log ends): what any lag
tool sees, independent of the service's database.

Partitions of the group's topics that were never committed are listed with ``-`` as the
current offset and the whole log as lag, as Kafka's tool does for an assigned partition.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from service.errors import KafkaReadError
from service.log_ends import KafkaLogEndReader
from service.offsets import TopicPartition

COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    current: int | None
    log_end: int | None

    @property
    def lag(self) -> int | None:
        if self.log_end is None:
            return None
        return max(0, self.log_end - (self.current or 0))


@dataclass(frozen=True)
class GroupReport:
    group_id: str
    state: str
    members: int
    rows: tuple[PartitionRow, ...]

    @property
    def total_lag(self) -> int:
        return sum(row.lag or 0 for row in self.rows)

    def table(self) -> str:
        lines = []
        if self.members == 0:
            lines += [f"Consumer group '{self.group_id}' has no active members.", ""]
        cells = [
            (
                self.group_id,
                row.topic,
                str(row.partition),
                "-" if row.current is None else str(row.current),
                "-" if row.log_end is None else str(row.log_end),
                "-" if row.lag is None else str(row.lag),
            )
            for row in self.rows
        ]
        widths = [max(len(c[i]) for c in [COLUMNS, *cells]) for i in range(len(COLUMNS))]
        for line in [COLUMNS, *cells]:
            padded = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
            lines.append("  ".join(padded).rstrip())
        return "\n".join(lines)


async def describe_group(
    client_options: Mapping[str, Any],
    group_id: str,
    topics: Sequence[str] = (),
    *,
    request_timeout: float = 10.0,
) -> GroupReport:
    """``topics``: also list these topics' uncommitted partitions (default: the topics the
    group committed to)."""
    admin = AIOKafkaAdminClient(**client_options, request_timeout_ms=int(request_timeout * 1000))
    reader = KafkaLogEndReader(client_options, timeout=request_timeout)
    try:
        async with asyncio.timeout(3 * request_timeout):
            await admin.start()
            described = await admin.describe_consumer_groups([group_id])
            committed = await admin.list_consumer_group_offsets(group_id)
            wanted = sorted(set(topics) | {tp.topic for tp in committed})
            partitions = set(_partitions(await admin.describe_topics(wanted))) if wanted else set()
            partitions |= {TopicPartition(tp.topic, tp.partition) for tp in committed}
            ends = (await reader.log_ends(partitions)).ends
    except (KafkaError, TimeoutError) as exc:
        raise KafkaReadError(f"describing group {group_id!r} failed: {exc!r}") from exc
    finally:
        await reader.close()
        with contextlib.suppress(Exception):
            await admin.close()
    state, members = _state(described, group_id)
    by_tp = {TopicPartition(tp.topic, tp.partition): meta.offset for tp, meta in committed.items()}
    rows = tuple(
        PartitionRow(tp.topic, tp.partition, _offset(by_tp.get(tp)), ends.get(tp))
        for tp in sorted(partitions)
    )
    return GroupReport(group_id, state, members, rows)


def _partitions(topics: list[dict[str, Any]]) -> list[TopicPartition]:
    return [
        TopicPartition(topic["topic"], partition["partition"])
        for topic in topics
        if topic["error_code"] == 0
        for partition in topic["partitions"]
    ]


def _offset(offset: int | None) -> int | None:
    return offset if offset is not None and offset >= 0 else None


def _state(described: Any, group_id: str) -> tuple[str, int]:
    """(state, members) from aiokafka's DescribeGroups response (one group asked)."""
    for response in described:
        for group in response.groups:
            if group[1] == group_id:
                return str(group[2]) or "Empty", len(group[5])
    return "Dead", 0
