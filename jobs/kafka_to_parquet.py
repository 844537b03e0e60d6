"""A real streaming job: Kafka topics to Parquet files, with a checkpoint, reporting every
batch to the sidecar so that its consumer group shows the job's progress.

    python -m jobs.kafka_to_parquet --bootstrap-servers 127.0.0.1:9092 --topics orders \\
        --output /data/orders --checkpoint /data/orders-checkpoint \\
        --sidecar-url http://127.0.0.1:8000 --group orders-to-parquet

Without ``--sidecar-url`` the job runs with no listener at all: have the service follow
its checkpoint folder instead (``offset-sidecar follow /data/orders-checkpoint --group
orders-to-parquet``).

(or the same arguments after ``spark-submit jobs/kafka_to_parquet.py`` with the connector
jars and ``--py-files`` holding ``jobs/``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from spark_offset_listener.listener import OffsetCommitListener

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


def start_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    topics: str,
    output: str,
    checkpoint: str,
    trigger_seconds: float = 2.0,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    query_name: str = "kafka_to_parquet",
    available_now: bool = False,
) -> StreamingQuery:
    """``available_now``: process what the topics hold now, in batches, then stop (Spark's
    ``Trigger.AvailableNow``); otherwise a batch every ``trigger_seconds``."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topics)
        .option("startingOffsets", starting_offsets)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    records = reader.load().selectExpr(
        "topic",
        "partition",
        "offset",
        "CAST(key AS STRING) AS key",
        "CAST(value AS STRING) AS value",
        "timestamp",
    )
    writer = (
        records.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .queryName(query_name)
    )
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{trigger_seconds} seconds").start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topics", required=True, help="comma-separated topics")
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument(
        "--sidecar-url", help="report batches to the sidecar (none: follow the checkpoint)"
    )
    parser.add_argument("--group", help="consumer group to commit to (with --sidecar-url)")
    parser.add_argument("--token", default=None, help="bearer token for the sidecar")
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--run-seconds", type=float, default=0, help="0: until stopped")
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process what the topics hold now, then stop (Trigger.AvailableNow)",
    )
    args = parser.parse_args(argv)
    if args.sidecar_url and not args.group:
        parser.error("--sidecar-url needs --group")

    from jobs.spark_session import kafka_spark_session

    spark = kafka_spark_session("kafka-to-parquet")
    if args.sidecar_url:
        spark.streams.addListener(
            OffsetCommitListener(args.sidecar_url, group_id=args.group, token=args.token)
        )
    query = start_query(
        spark,
        bootstrap_servers=args.bootstrap_servers,
        topics=args.topics,
        output=args.output,
        checkpoint=args.checkpoint,
        trigger_seconds=args.trigger_seconds,
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        available_now=args.available_now,
    )
    try:
        query.awaitTermination(args.run_seconds or None)
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
