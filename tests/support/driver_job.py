"""A real Spark job as a driver process of its own, for drivers in clean environments
(``python job.py URL GROUP BOOTSTRAP TOPIC CHECKPOINT JARS MODE [RUNS]``, MODE ``classic``
or ``connect``): it reads TOPIC from the start in batches of 60 records
(``Trigger.AvailableNow``), reports each batch to URL with the listener, or with URL ``-``
has no listener at all (the service follows CHECKPOINT), and prints ``{"id", "batch",
"spark"}`` of its query as a line of its own. With RUNS above 1 it starts the query again
on the same checkpoint, in the same session, each time a line comes on its standard input:
a restart without a second driver's start (a JVM, and for Connect a server)."""

from __future__ import annotations

import textwrap

JOB = textwrap.dedent(
    """
    import json, sys

    from pyspark.sql import SparkSession

    url, group, bootstrap, topic, checkpoint, jars, mode = sys.argv[1:8]
    runs = int(sys.argv[8]) if len(sys.argv) > 8 else 1
    builder = SparkSession.builder
    # "connect": a Spark Connect session to a local server that the client starts. A 4.x
    # client runs its listeners on its own listener bus (events over gRPC, never py4j); a
    # 3.5 client pickles them and the server runs them in a Python worker (PYSPARK_PYTHON).
    builder = builder.remote("local[1]") if mode == "connect" else builder.master("local[1]")
    spark = (
        builder.config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    if url != "-":  # "-": no listener, the service follows the checkpoint folder
        from spark_offset_listener.listener import OffsetCommitListener

        spark.streams.addListener(OffsetCommitListener(url, group_id=group))
    for run in range(runs):
        if run:
            sys.stdin.readline()  # the caller's turn: it produced more, started a service
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "60")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        print(json.dumps({"id": str(query.id), "batch": query.lastProgress["batchId"],
                          "spark": spark.version}), flush=True)
    spark.stop()
    """
)
