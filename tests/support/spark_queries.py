"""Real Spark streaming queries over real topics, shared by the end-to-end tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def run_available_now(
    spark: Any,
    bootstrap: str,
    topics: list[str],
    work: Path,
    *,
    output: str = "out",
    starting_offsets: str = "earliest",
) -> Any:
    """One streaming query with one Kafka source per topic, run until caught up."""
    frames = [
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
        .option("maxOffsetsPerTrigger", "250")
        .load()
        .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
        for topic in topics
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    query = (
        union.writeStream.format("parquet")
        .option("path", str(work / output))
        .option("checkpointLocation", str(work / "checkpoint"))
        .queryName("e2e")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    return query


def last_end_offsets(query: Any) -> dict[tuple[str, int], int]:
    return end_offsets(query.lastProgress)


def end_offsets(progress: dict[str, Any]) -> dict[tuple[str, int], int]:
    """Every Kafka source's end offsets in one progress, by (topic, partition)."""
    ends: dict[tuple[str, int], int] = {}
    for source in progress["sources"]:
        end = source["endOffset"]
        end = json.loads(end) if isinstance(end, str) else end
        for topic, partitions in end.items():
            for partition, offset in partitions.items():
                ends[(topic, int(partition))] = offset
    return ends
