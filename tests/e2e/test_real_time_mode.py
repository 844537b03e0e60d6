"""Real-time mode (Spark 4.1+; PySpark's API has ``trigger(realTime=...)`` from 4.2.0),
on the project's PySpark with a Kafka source and a Kafka sink, while records keep coming:
a real-time batch lasts one trigger duration and processes records as they arrive, and
Spark reports one progress per batch whose Kafka ``endOffset`` is where the batch ended,
the same map it writes to ``offsets/N``. Both ways of attaching therefore work unchanged,
one commit per trigger duration: the listener (one service) and the checkpoint folder
followed with no listener (another service) commit their groups to the topic's end."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.service_process import ServiceProcess
from spark_offset_listener.listener import OffsetCommitListener
from tests.support.kafka import committed_offsets, log_ends, produce, run_sync, unique_group
from tests.support.service import wait_for
from tests.support.spark_queries import end_offsets, last_end_offsets

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

TRIGGER_SECONDS = 5  # the least Spark takes (spark.sql.streaming.realTimeMode.minBatchDuration)


def offset_log_ends(checkpoint: Path, batch: int) -> dict[tuple[str, int], int]:
    """The Kafka source's offsets of batch ``batch`` as Spark wrote them to ``offsets/N``
    (a version line, the metadata line, then one line per source)."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    (source,) = lines[2:]
    return {(t, int(p)): o for t, parts in json.loads(source).items() for p, o in parts.items()}


def test_real_time_mode_is_committed_by_both_ways_of_attaching(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    source, sink = new_topic(2), new_topic(1)
    run_sync(produce(kafka_bootstrap, source, 100))
    listened, followed = unique_group("realtime-l"), unique_group("realtime-f")
    checkpoint = tmp_path / "checkpoint"
    (tmp_path / "l").mkdir()
    (tmp_path / "f").mkdir()
    by_listener = ServiceProcess(tmp_path / "l", kafka_bootstrap).start()
    by_folder = ServiceProcess(tmp_path / "f", kafka_bootstrap, follow_interval_seconds=0.3)
    by_folder.start()
    listener = OffsetCommitListener(by_listener.url, group_id=listened, flush_timeout=2.0)
    spark.streams.addListener(listener)
    query = None
    try:
        answer = by_folder.http.post(
            "/v1/followed-folders", json={"path": str(checkpoint), "group_id": followed}
        )
        assert answer.status_code == 201, answer.text
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .outputMode("update")
            .trigger(realTime=f"{TRIGGER_SECONDS} seconds")
            .start()
        )
        # Records keep coming while batches run: 40 every half trigger, 6 times.
        for round_ in range(6):
            run_sync(produce(kafka_bootstrap, source, 40, start=100 + 40 * round_))
            time.sleep(TRIGGER_SECONDS / 2)
        ends = log_ends(kafka_bootstrap, [source])

        def caught_up() -> bool:
            progress = query.lastProgress
            return progress is not None and last_end_offsets(query) == ends

        wait_for(caught_up, 120, "a real-time batch ending at the topic's end")
        wait_for(lambda: committed_offsets(kafka_bootstrap, listened) == ends, 30, "listener")
        wait_for(lambda: committed_offsets(kafka_bootstrap, followed) == ends, 30, "folder")

        progresses = [p for p in query.recentProgress if p["sources"]]
        assert len({p["batchId"] for p in progresses}) >= 2, "several real-time batches"
        first = end_offsets(progresses[0])
        assert sum(first.values()) < sum(ends.values()), "records arrived while a later batch ran"
        for progress in progresses:  # what the listener reports is what offsets/N says
            assert end_offsets(progress) == offset_log_ends(checkpoint, progress["batchId"])
        assert listener.events >= len(progresses)
        assert by_listener.query(str(query.id))["last_completed_checkpoint"] >= 1
        delivered = log_ends(kafka_bootstrap, [sink])
        assert sum(delivered.values()) == sum(ends.values()), "every record went through"
    finally:
        if query is not None:
            query.stop()
        spark.streams.removeListener(listener)
        listener.sender.close(0.5)
        by_listener.stop()
        by_folder.stop()
