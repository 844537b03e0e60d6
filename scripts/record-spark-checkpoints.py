"""Record real Spark checkpoint folders for the offset-log reader's tests.

    .venv/bin/python scripts/record-spark-checkpoints.py

Runs real streaming queries of the installed PySpark against the local Kafka broker
(started here if none answers) and copies what Spark wrote -- ``metadata``,
``offsets/N``, ``commits/N`` -- into ``tests/fixtures/spark-checkpoints/<pyspark version>/
<case>/``, with ``expected.json``: Spark's own ``lastProgress`` end offsets of the last
batch of each run (the reader must find exactly those in ``offsets/<that batch>``).

Cases: ``kafka-and-files`` (one Kafka source on two topics and a file source, restarted
once with the same checkpoint), ``two-kafka-sources`` (two Kafka sources, one of them on
two topics, unioned). Run it again for another PySpark version to add its folder.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "jobs")]

from harness import kafka_broker  # noqa: E402
from jobs.spark_session import kafka_spark_session  # noqa: E402
from tests.support.kafka import create_topics, produce, run_sync  # noqa: E402


def kafka_stream(spark: Any, bootstrap: str, topics: str) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
    )


def run(frame: Any, work: Path) -> dict[str, Any]:
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    progress = query.lastProgress
    return {"batchId": progress["batchId"], "id": progress["id"], "sources": progress["sources"]}


def keep(work: Path, target: Path, runs: list[dict[str, Any]]) -> None:
    shutil.rmtree(target, ignore_errors=True)
    checkpoint = work / "checkpoint"
    (target / "offsets").mkdir(parents=True)
    (target / "commits").mkdir()
    shutil.copy(checkpoint / "metadata", target / "metadata")
    for log in ("offsets", "commits"):
        for file in (checkpoint / log).iterdir():
            if file.name.isdigit():
                shutil.copy(file, target / log / file.name)
    (target / "expected.json").write_text(json.dumps(runs, indent=1) + "\n")


def main() -> None:
    import pyspark

    broker = kafka_broker.acquire()
    bootstrap = broker.bootstrap
    suffix = uuid.uuid4().hex[:6]
    topics = [f"ckpt-{name}-{suffix}" for name in ("orders", "payments", "refunds")]
    run_sync(create_topics(bootstrap, topics, 3))
    for topic in topics:
        run_sync(produce(bootstrap, topic, 150))
    out = ROOT / "tests" / "fixtures" / "spark-checkpoints" / pyspark.__version__
    spark = kafka_spark_session("record-checkpoints", conf={"spark.sql.shuffle.partitions": "2"})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            files = work / "incoming"
            files.mkdir()
            (files / "1.json").write_text('{"value": "a"}\n')
            both = kafka_stream(spark, bootstrap, f"{topics[0]},{topics[1]}").unionByName(
                spark.readStream.schema("value STRING").json(str(files))
            )
            runs = [run(both, work)]
            for topic in topics[:2]:  # more records, and a restart on the same checkpoint
                run_sync(produce(bootstrap, topic, 90, start=150))
            (files / "2.json").write_text('{"value": "b"}\n')
            runs.append(run(both, work))
            keep(work, out / "kafka-and-files", runs)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            union = kafka_stream(spark, bootstrap, f"{topics[0]},{topics[1]}").unionByName(
                kafka_stream(spark, bootstrap, topics[2])
            )
            keep(work, out / "two-kafka-sources", [run(union, work)])
    finally:
        spark.stop()
        if broker.started_here:
            broker.stop()
    print(f"recorded into {out}")


if __name__ == "__main__":
    main()
