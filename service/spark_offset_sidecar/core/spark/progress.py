"""Read a Spark StreamingQueryProgress (as ``progress.json`` prints it, or with
``endOffset`` as a JSON string, as a Python listener has it) into a checkpoint. Kafka
sources are recognised by the content of ``endOffset`` (topic -> partition -> offset),
never by position or description, which change between Spark versions. When two Kafka
sources name one partition (a self-join), the smaller offset is kept: the group never
claims more progress than every reader made.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from spark_offset_sidecar.core.names import QUERY_ID, RUN_ID, TOPIC
from spark_offset_sidecar.core.offsets import (
    MAX_OFFSET,
    MAX_PARTITION,
    TopicPartition,
    shared_partition,
)
from spark_offset_sidecar.errors import InvalidEvent

_PARTITION = re.compile(r"0|[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class ProgressReport:
    query_id: str
    run_id: str | None
    batch_id: int
    offsets: dict[TopicPartition, int]
    kafka_sources: int
    # The job's pace as the event states it (None: absent or not a finite number; Spark
    # leaves a rate out when it is NaN). Never a reason to refuse an event.
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    batch_duration_ms: int | None = None


def checkpoint_id_problem(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return "must be an integer"
    if not 0 <= value <= MAX_OFFSET:
        return f"must be between 0 and {MAX_OFFSET}"
    return None


def parse_progress(progress: Mapping[str, Any], field: str = "progress") -> ProgressReport:
    query_id = progress.get("id")
    if problem := QUERY_ID.problem(query_id):
        raise InvalidEvent(f"{field}.id", problem)
    run_id = progress.get("runId")
    if run_id is not None and (problem := RUN_ID.problem(run_id)):
        raise InvalidEvent(f"{field}.runId", problem)
    batch_id = progress.get("batchId")
    if problem := checkpoint_id_problem(batch_id):
        raise InvalidEvent(f"{field}.batchId", problem)
    sources = progress.get("sources", [])
    if not isinstance(sources, list):
        raise InvalidEvent(f"{field}.sources", "must be a list")
    offsets: dict[TopicPartition, int] = {}
    kafka_sources = 0
    for index, source in enumerate(sources):
        where = f"{field}.sources[{index}].endOffset"
        if not _is_object(source):
            raise InvalidEvent(f"{field}.sources[{index}]", "must be an object")
        end = _decode(source.get("endOffset"), where)
        if not _looks_like_kafka(end):
            continue
        kafka_sources += 1
        found = kafka_offsets(end, where)
        if not offsets:  # the first Kafka source (most jobs have one)
            offsets = found
            continue
        for tp, offset in found.items():
            offsets[tp] = min(offset, offsets.get(tp, offset))
    duration = _rate(progress.get("batchDuration"))
    # the checks above established the types
    return ProgressReport(
        cast(str, query_id),
        run_id,
        cast(int, batch_id),
        offsets,
        kafka_sources,
        _rate(progress.get("inputRowsPerSecond")),
        _rate(progress.get("processedRowsPerSecond")),
        None if duration is None else int(duration),
    )


def _rate(value: Any) -> float | None:
    """A non-negative finite number, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def kafka_offsets(nested: Mapping[str, Any], field: str) -> dict[TopicPartition, int]:
    """Validate ``{"topic": {"0": 42}}`` and flatten it. (Every event runs this: the
    common forms are checked by the fastest test that gives the same answer, and a
    field's name is only built for its refusal.)"""
    flat: dict[TopicPartition, int] = {}
    for topic, partitions in nested.items():
        if problem := TOPIC.problem(topic):
            raise InvalidEvent(f"{field}.{topic}", problem)
        if not _is_object(partitions):
            raise InvalidEvent(f"{field}.{topic}", "must be an object of partition -> offset")
        for partition, offset in partitions.items():
            number = _partition_number(partition)
            if number is None:
                raise InvalidEvent(
                    f"{field}.{topic}.{partition}",
                    f"partition must be an integer between 0 and {MAX_PARTITION}",
                )
            if type(offset) is not int and (
                isinstance(offset, bool) or not isinstance(offset, int)
            ):
                raise InvalidEvent(f"{field}.{topic}.{partition}", "offset must be an integer")
            if not 0 <= offset <= MAX_OFFSET:
                raise InvalidEvent(
                    f"{field}.{topic}.{partition}", f"offset must be between 0 and {MAX_OFFSET}"
                )
            flat[shared_partition(topic, number)] = offset
    return flat


# The partition ids most topics have, as JSON writes them: the same answer as the
# expression below, from a dict (a leading zero, or anything else, takes the long way).
_SMALL_PARTITIONS = {str(number): number for number in range(1024)}


def _partition_number(partition: object) -> int | None:
    """``partition`` as a partition id (a decimal string of 0..MAX_PARTITION), or None."""
    if type(partition) is str and (number := _SMALL_PARTITIONS.get(partition)) is not None:
        return number
    if not isinstance(partition, str) or not _PARTITION.fullmatch(partition):
        return None
    number = int(partition)
    return number if number <= MAX_PARTITION else None


def _decode(end: Any, field: str) -> Any:
    if isinstance(end, str):
        if end in ("", "None", "null"):
            return None
        try:
            return json.loads(end)
        except (ValueError, RecursionError):
            raise InvalidEvent(field, "is a string but not JSON") from None
    return end


def _looks_like_kafka(end: Any) -> bool:
    return _is_object(end) and bool(end) and all(_is_object(v) for v in end.values())


def _is_object(value: object) -> bool:
    """A mapping; JSON's objects (dicts) without the abstract class's slower check."""
    return type(value) is dict or isinstance(value, Mapping)
