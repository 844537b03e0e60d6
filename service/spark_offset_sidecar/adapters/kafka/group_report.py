"""A consumer group as ``kafka-consumer-groups.sh --describe`` shows it, read from Kafka
itself (what any lag tool sees, independent of the service's database). Partitions never
committed show ``-`` as the current offset and the whole log as lag, as Kafka's tool does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spark_offset_sidecar.adapters.kafka.admin import GroupAdmin
from spark_offset_sidecar.adapters.kafka.log_ends import KafkaLogEndReader
from spark_offset_sidecar.core.offsets import TopicPartition

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
    reader = KafkaLogEndReader(client_options, timeout=request_timeout)
    try:
        async with GroupAdmin(client_options, request_timeout=request_timeout) as admin:
            described = await admin.describe(group_id)
            committed = await admin.committed(group_id)
            wanted = sorted(set(topics) | {tp.topic for tp in committed})
            partitions = {
                TopicPartition(topic, partition)
                for topic, ids in (await admin.partitions(wanted)).items()
                for partition in ids
            } | set(committed)
        ends = (await reader.log_ends(partitions)).ends
    finally:
        await reader.close()
    rows = tuple(
        PartitionRow(
            tp.topic, tp.partition, committed[tp].offset if tp in committed else None, ends.get(tp)
        )
        for tp in sorted(partitions)
    )
    return GroupReport(group_id, described.state, described.members, rows)
