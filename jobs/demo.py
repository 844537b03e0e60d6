"""The demo behind ``make demo``: watch a Spark job's consumer-group lag go to zero.

Starts what it needs and stops what it started:
  1. a real Kafka broker (scripts/local-kafka.sh; reused if one already answers),
  2. the sidecar (``offset-sidecar serve``, SQLite in .local/demo),
  3. the Kafka-to-Parquet PySpark job with the listener attached (at most 3000 records
     a batch, a batch every 2 seconds),
  4. a producer writing DEMO_RECORDS records (default 30000) at DEMO_RATE per second
     (default 1500) to a 3-partition topic,
then prints, every 2 seconds, the topic's end offsets beside the group's committed offsets
(read from Kafka, as any lag tool reads them) until the lag is zero. Exits 0 only then.

DEMO_STATE_DIR (default .local/demo) holds the sidecar's database and log, Spark's log, the
job's output and checkpoint; LOCAL_KAFKA_PORT / LOCAL_KAFKA_DIR choose the broker
(scripts/local-kafka.sh). What it prints is what a user follows: the demo's own lines and
the group's table; the service's and Spark's own logs go to their files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("DEMO_STATE_DIR", ROOT / ".local" / "demo")).resolve()
# A topic of its own per run: the broker keeps earlier runs' records, and a new query
# reading from the earliest offset would take those in too.
TOPIC = f"demo-events-{int(time.time())}"
GROUP = "demo-kafka-to-parquet"


LAG_READ_INTERVAL = os.environ.get("SIDECAR_LAG_READ_INTERVAL_SECONDS", "2")


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


async def _create_topic(bootstrap: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


async def _produce(bootstrap: str, records: int, rate: float) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        started = time.monotonic()
        for i in range(records):
            await producer.send(TOPIC, f"event {i}".encode(), key=str(i % 97).encode())
            if i % 200 == 0:
                await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        await producer.flush()
    finally:
        await producer.stop()


def _lag(bootstrap: str) -> tuple[int, bool]:
    """Print the group as kafka-consumer-groups.sh would, read from Kafka by the sidecar's
    own ``describe-group`` (the demo imports nothing of the service); (total lag, anything
    committed), or (-1, False) when the group could not be read yet."""
    describe = [sys.executable, "-m", "spark_offset_sidecar.cli", "describe-group", GROUP]
    env = {**os.environ, "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    answer = subprocess.run(
        [*describe, "--topic", TOPIC], env=env, capture_output=True, text=True, check=False
    )
    if answer.returncode != 0:  # it already waited, with a bound; try again next tick
        say(f"could not read the group from Kafka yet: {answer.stderr.strip()[-300:]}")
        return -1, False
    # Rows: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ("-": none). The group
    # keeps its offsets of earlier runs' topics (on a broker that was reused): this run's
    # topic only.
    lines = [
        line
        for line in answer.stdout.splitlines()
        if not line.startswith(f"{GROUP} ") or line.split()[1] == TOPIC
    ]
    print("\n".join("  " + line for line in lines), flush=True)
    rows = [line.split() for line in lines if line.startswith(f"{GROUP} ")]
    if not rows or any(row[5] == "-" for row in rows):
        return -1, any(row[3] != "-" for row in rows)
    return sum(int(row[5]) for row in rows), any(row[3] != "-" for row in rows)


def _status(url: str) -> None:
    """The service's own Burrow-style status of the group."""
    with urllib.request.urlopen(f"{url}/v1/status/{GROUP}", timeout=5) as answer:
        status = json.load(answer)
    late = status.get("lag_seconds")
    say(
        f"sidecar status of {GROUP}: {status['status']}, total lag {status['totallag']}, "
        f"time lag {'unknown' if late is None else f'{late:.1f} s'}"
    )


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """This process's standard output and error go to ``log`` meanwhile: what it starts
    then (Spark's JVM) keeps writing there, its warnings and its log, for good."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log.open("ab") as file:
        os.dup2(file.fileno(), 1)
        os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, kept in zip((1, 2), saved, strict=True):
            os.dup2(kept, fd)
            os.close(kept)


def _answers(bootstrap: str) -> bool:
    probe = [sys.executable, str(ROOT / "scripts" / "kafka_metadata.py"), bootstrap]
    return subprocess.run(probe, capture_output=True).returncode == 0


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the sidecar exited; see {STATE / 'sidecar.log'}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the sidecar did not become ready")


def main() -> int:
    records = int(os.environ.get("DEMO_RECORDS", "30000"))
    rate = float(os.environ.get("DEMO_RATE", "1500"))
    port = os.environ.get("SIDECAR_PORT", "8000")
    url = f"http://127.0.0.1:{port}"
    shutil.rmtree(STATE, ignore_errors=True)
    STATE.mkdir(parents=True)

    kafka_script = str(ROOT / "scripts" / "local-kafka.sh")
    bootstrap = f"127.0.0.1:{os.environ.get('LOCAL_KAFKA_PORT', '9092')}"
    # Reuse a broker that already answers (ours from an earlier run, or anyone's);
    # stop at the end only one that this demo started.
    already_running = _answers(bootstrap)
    if not already_running:
        bootstrap = subprocess.run(
            [kafka_script, "start"], check=True, capture_output=True, text=True
        ).stdout.strip()
    say(f"Kafka (KRaft, single node) answers on {bootstrap}")
    asyncio.run(_create_topic(bootstrap))
    say(f"before the job: {GROUP} as lag tools see it (nothing committed yet):")
    _lag(bootstrap)

    sidecar_env = {
        **os.environ,
        "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SIDECAR_DATABASE_URL": f"sqlite:///{STATE / 'sidecar.db'}",
        "SIDECAR_PORT": port,
        "SIDECAR_LAG_READ_INTERVAL_SECONDS": LAG_READ_INTERVAL,
    }
    log = (STATE / "sidecar.log").open("wb")
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "spark_offset_sidecar.cli", "serve"],
        env=sidecar_env,
        stdout=log,
        stderr=log,
    )
    try:
        _wait_ready(url, sidecar)
        say(f"sidecar ready at {url} (SQLite {STATE / 'sidecar.db'}; log {STATE / 'sidecar.log'})")
        producer = threading.Thread(
            target=lambda: asyncio.run(_produce(bootstrap, records, rate)), daemon=True
        )
        caught_up = run_spark(bootstrap, url, producer, records, rate)
    finally:
        sidecar.terminate()
        sidecar.wait(30)
        say("sidecar stopped")
        if not already_running:
            subprocess.run([kafka_script, "stop"], check=False, capture_output=True)
            say("Kafka stopped")
    return 0 if caught_up else 1


def run_spark(
    bootstrap: str, url: str, producer: threading.Thread, records: int, rate: float
) -> bool:
    """Run the job until its group's lag read back from Kafka is zero; False on time-out."""
    from jobs.kafka_to_parquet import start_query
    from jobs.spark_session import kafka_spark_session
    from spark_offset_listener.listener import OffsetCommitListener

    spark_log = STATE / "spark.log"
    say(f"starting Spark (local[2]) with Spark's Kafka connector (log {spark_log})")
    with _output_to(spark_log):
        spark = kafka_spark_session("sidecar-demo")
    listener = OffsetCommitListener(url, group_id=GROUP)
    spark.streams.addListener(listener)
    query = start_query(
        spark,
        bootstrap_servers=bootstrap,
        topics=TOPIC,
        output=str(STATE / "parquet"),
        checkpoint=str(STATE / "checkpoint"),
        trigger_seconds=2,
        max_offsets_per_trigger=3000,
        query_name="demo",
    )
    say(
        f"Spark query {query.id} runs; its listener reports each batch to the sidecar, "
        f"which commits the batch's offsets to the group {GROUP}"
    )
    producer.start()
    say(f"producing {records} records to {TOPIC} at {rate:.0f}/s")
    deadline = time.monotonic() + float(os.environ.get("DEMO_TIMEOUT", "300"))
    caught_up = seen_commit = False
    try:
        while time.monotonic() < deadline:
            time.sleep(2)
            progress = query.lastProgress
            if progress:
                say(f"batch {progress['batchId']} done; {GROUP} read back from Kafka:")
            else:
                say(f"the first batch is running; {GROUP} read back from Kafka:")
            lag, committed = _lag(bootstrap)
            if committed and not seen_commit:
                seen_commit = True
                say(f"offsets committed: every lag tool now sees {GROUP} and its lag")
            if lag == 0 and not producer.is_alive() and committed:
                say("lag is zero: every record was processed and its offset committed")
                time.sleep(float(LAG_READ_INTERVAL) + 0.5)  # the sidecar's next read
                _status(url)
                caught_up = True
                break
        else:
            say(
                f"timed out before the lag reached zero; see {STATE / 'sidecar.log'} and "
                f"{STATE / 'spark.log'}"
            )
    finally:
        query.stop()
        spark.stop()
        say(f"Spark stopped; its listener reported {listener.events} batches to the sidecar")
    return caught_up


if __name__ == "__main__":
    sys.exit(main())
