"""Spark jobs with no listener, committed through their checkpoint folders: real PySpark
over real topics, the service as a real process following the folder (a local one, and
ones on real S3, Azure Blob / ADLS Gen2 and Google Cloud Storage servers: moto, Azurite,
fake-gcs-server), the group read back from the broker.

Spark writes its checkpoint to a local folder; for S3 the folder is copied into the
object store as it grows (``CheckpointSync``, the way ``aws s3 sync`` or ``azcopy sync``
would): Spark's own ``s3a://``, ``abfss://`` and ``gs://`` writers need Hadoop connectors
of hundreds of MB, which this project does not download (harness/s3_server.py says why)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.machine import ROOT
from harness.s3_server import S3Server
from harness.service_process import ServiceProcess
from spark_offset_listener.listener import OffsetCommitListener
from tests.support.checkpoints import COMMIT_LOG, offset_log
from tests.support.cli import offset_sidecar
from tests.support.in_thread import InThread
from tests.support.kafka import committed_offsets, log_ends, produce, run_sync, unique_group
from tests.support.offset_watch import OffsetWatch
from tests.support.service import metric, metric_sum, wait_for
from tests.support.spark_queries import last_end_offsets, run_available_now

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def follow(service: ServiceProcess, path: str, group: str) -> None:
    done = offset_sidecar("127.0.0.1:1", "follow", path, "--group", group, "--url", service.url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["group_id"] == group


def folder_status(service: ServiceProcess, path: str) -> dict[str, Any]:
    folders = service.http.get("/v1/followed-folders").json()
    return next(f for f in folders if f["path"] == path)


@pytest.fixture
def following(tmp_path: Path, kafka_bootstrap: str) -> Iterator[ServiceProcess]:
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, follow_interval_seconds=0.5, follow_relist_every=10
    ).start()
    yield service
    service.stop()


def test_a_job_without_a_listener_is_committed_through_its_local_checkpoint(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    following: ServiceProcess,
) -> None:
    """The project's Kafka-to-Parquet job, run as its own Spark driver with no
    ``--sidecar-url``: nothing in that process talks to the service."""
    orders, payments = new_topic(3), new_topic(2)
    run_sync(produce(kafka_bootstrap, orders, 900))
    run_sync(produce(kafka_bootstrap, payments, 400))
    group = unique_group("follow")
    checkpoint = str(tmp_path / "checkpoint")
    follow(following, checkpoint, group)
    ends = log_ends(kafka_bootstrap, [orders, payments])
    assert sum(ends.values()) == 1300
    with OffsetWatch(kafka_bootstrap, group) as watch:
        job = subprocess.run(
            [
                sys.executable, "-m", "jobs.kafka_to_parquet",
                "--bootstrap-servers", kafka_bootstrap, "--topics", f"{orders},{payments}",
                "--output", str(tmp_path / "out"), "--checkpoint", checkpoint,
                "--available-now", "--max-offsets-per-trigger", "250",
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert job.returncode == 0, job.stderr[-3000:]
        watch.wait_for(ends, timeout=30)
    assert watch.regressions == []
    assert len(watch.history) >= 2, "committed batch by batch, not once at the end"
    commits = (tmp_path / "checkpoint" / "commits").iterdir()
    batches = sorted(int(p.name) for p in commits if p.name.isdigit())
    metadata = json.loads((tmp_path / "checkpoint" / "metadata").read_text())
    status = folder_status(following, checkpoint)
    assert status["query_id"] == metadata["id"]
    assert status["last_batch_recorded"] == batches[-1] >= 4
    assert status["errors"] == {}
    text = following.metrics()
    assert metric(text, "sidecar_followed_folder_last_batch", folder=checkpoint) == batches[-1]
    assert metric(text, "sidecar_followed_folder_behind_seconds", folder=checkpoint) == 0
    listed = offset_sidecar("127.0.0.1:1", "followed", "--url", following.url)
    assert listed.returncode == 0, listed.stderr
    assert checkpoint in listed.stdout
    assert group in listed.stdout


class CheckpointSync(InThread):
    """Copies a local checkpoint folder into an object store as Spark writes it (metadata,
    then each new ``offsets/N``, then each new ``commits/N``), from a thread; ``put(key,
    body)`` writes one object under the folder."""

    JOIN_SECONDS = 10.0

    def __init__(self, local: Path, put: Callable[[str, bytes], None]) -> None:
        self.local, self.put = local, put
        self.copied: set[str] = set()
        super().__init__()

    @classmethod
    def to_s3(cls, local: Path, server: S3Server, bucket: str, prefix: str) -> CheckpointSync:
        client = server.client()
        client.create_bucket(Bucket=bucket)
        return cls(
            local,
            lambda key, body: client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body),
        )

    def __exit__(self, *_exc: object) -> None:
        super().__exit__(*_exc)
        self.once()

    def once(self) -> None:
        for name in ("metadata", "offsets", "commits"):
            path = self.local / name
            files = (
                [path] if path.is_file() else sorted(path.glob("[0-9]*")) if path.exists() else []
            )
            for file in files:
                key = str(file.relative_to(self.local))
                if key not in self.copied:
                    self.put(key, file.read_bytes())
                    self.copied.add(key)

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self.once()


def test_a_spark_sql_job_is_committed_through_its_checkpoint_on_s3(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    s3_server: S3Server,
) -> None:
    topic = new_topic(3)
    run_sync(produce(kafka_bootstrap, topic, 1200))
    group = unique_group("sql")
    bucket = f"ckpt-{uuid.uuid4().hex[:10]}"
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        follow_interval_seconds=0.5,
        checkpoint_storage_options=json.dumps(s3_server.storage_options()),
    ).start()
    try:
        # the bucket is there before the folder is followed (a missing one is an error)
        local = tmp_path / "checkpoint"
        sync = CheckpointSync.to_s3(local, s3_server, bucket, "orders-sql")
        follow(service, f"s3a://{bucket}/orders-sql", group)
        view = f"orders_{uuid.uuid4().hex[:8]}"
        (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "300")
            .load()
            .createOrReplaceTempView(view)
        )
        job = spark.sql(  # the job itself is SQL: no listener, no Python beyond start()
            f"SELECT partition, COUNT(*) AS records, MAX(offset) AS last "
            f"FROM {view} GROUP BY partition"
        )
        with sync:
            query = (
                job.writeStream.format("memory")
                .queryName(f"{view}_out")
                .outputMode("complete")
                .option("checkpointLocation", str(local))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(180)
        assert sync.copied, "the checkpoint reached the bucket"
        ends = last_end_offsets(query)
        assert sum(ends.values()) == 1200
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, 30, "commit")
        status = folder_status(service, f"s3a://{bucket}/orders-sql")
        assert status["last_batch_recorded"] == query.lastProgress["batchId"] >= 3
        assert status["errors"] == {}
    finally:
        service.stop()


def test_a_listener_and_a_follower_on_one_query_agree(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    following: ServiceProcess,
) -> None:
    topic = new_topic(3)
    run_sync(produce(kafka_bootstrap, topic, 1000))
    group = unique_group("both")
    follow(following, str(tmp_path / "checkpoint"), group)
    listener = OffsetCommitListener(following.url, group_id=group, flush_timeout=2.0, timeout=2.0)
    spark.streams.addListener(listener)
    try:
        with OffsetWatch(kafka_bootstrap, group) as watch:
            query = run_available_now(spark, kafka_bootstrap, [topic], tmp_path)
            ends = last_end_offsets(query)
            watch.wait_for(ends, timeout=30)
            wait_for(
                lambda: (
                    folder_status(following, str(tmp_path / "checkpoint"))["last_batch_recorded"]
                    == query.lastProgress["batchId"]
                ),
                what="the follower's last batch",
            )
    finally:
        spark.streams.removeListener(listener)
        listener.sender.close(0.5)
    assert watch.regressions == []

    def seconds(text: str) -> float:
        """The second reports of batches: duplicates or stale."""
        return sum(
            metric_sum(text, "sidecar_events_total", consumergroup=group, outcome=outcome)
            for outcome in ("duplicate", "stale")
        )

    text = wait_for(  # counted once the watcher that exports them is told (a second)
        lambda: (t := following.metrics()) and seconds(t) >= 1 and t,
        what="the second reporter of a batch counted",
    )
    assert metric_sum(text, "sidecar_events_total", consumergroup=group, outcome="conflict") == 0
    assert seconds(text) >= 1, "the second reporter of a batch is a duplicate"
    assert following.query(str(query.id))["group_id"] == group


@pytest.mark.faults
def test_killed_while_following_the_service_resumes_with_nothing_lost_or_backwards(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic = new_topic(3)
    run_sync(produce(kafka_bootstrap, topic, 1500))
    group = unique_group("kill")
    service = ServiceProcess(tmp_path, kafka_bootstrap, follow_interval_seconds=0.5).start()
    checkpoint = str(tmp_path / "checkpoint")
    follow(service, checkpoint, group)
    try:
        with OffsetWatch(kafka_bootstrap, group) as watch:
            killed = threading.Event()

            def kill_after_first_commit() -> None:
                wait_for(lambda: watch.latest, timeout=120, what="a first commit")
                service.kill()
                killed.set()

            killer = threading.Thread(target=kill_after_first_commit, daemon=True)
            killer.start()
            query = run_available_now(spark, kafka_bootstrap, [topic], tmp_path)
            killer.join(130)
            assert killed.is_set()
            ends = last_end_offsets(query)
            assert watch.latest != ends or query.lastProgress["batchId"] == 0
            service.start()  # the registration is in the database; the folder is listed again
            watch.wait_for(ends, timeout=30)
        assert watch.regressions == []
    finally:
        service.stop()


@pytest.mark.faults
def test_a_recreated_checkpoint_waits_for_the_old_query_to_be_released(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    following: ServiceProcess,
) -> None:
    topic = new_topic(2)
    run_sync(produce(kafka_bootstrap, topic, 400))
    group = unique_group("recreate")
    checkpoint = str(tmp_path / "checkpoint")
    follow(following, checkpoint, group)
    first = run_available_now(spark, kafka_bootstrap, [topic], tmp_path)
    ends = last_end_offsets(first)
    wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, 30, "commit")

    shutil.rmtree(checkpoint)  # the checkpoint is lost; the job starts anew where it was
    run_sync(produce(kafka_bootstrap, topic, 200, start=400))
    start = json.dumps({topic: {str(p): o for (_, p), o in ends.items()}})
    second = run_available_now(
        spark, kafka_bootstrap, [topic], tmp_path, output="out2", starting_offsets=start
    )
    assert second.id != first.id
    wait_for(
        lambda: folder_status(following, checkpoint)["errors"].get("conflict", 0) >= 1,
        what="the conflict of the new query id",
    )
    assert committed_offsets(kafka_bootstrap, group) == ends  # nothing moved meanwhile
    assert "release" in (folder_status(following, checkpoint)["last_error"] or "")

    released = following.http.delete(f"/v1/queries/{first.id}")
    assert released.status_code == 200, released.text
    new_ends = last_end_offsets(second)
    wait_for(lambda: committed_offsets(kafka_bootstrap, group) == new_ends, 30, "new commit")
    assert sum(new_ends.values()) == 600


@pytest.mark.faults
def test_an_s3_outage_and_garbage_files_commit_nothing_and_are_counted(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Files written as Spark writes them (the format itself is checked on real Spark's
    files in tests/unit/test_checkpoint_log.py) into a real S3-compatible server that is
    stopped and started again; the service and the broker are real."""
    topic = new_topic(1)
    run_sync(produce(kafka_bootstrap, topic, 100))
    group = unique_group("outage")
    server = S3Server().start()
    client = server.client()
    client.create_bucket(Bucket="checkpoints")

    def put(name: str, text: str) -> None:
        client.put_object(Bucket="checkpoints", Key=f"job/{name}", Body=text.encode())

    def batch(n: int, offset: int, commit: str = COMMIT_LOG) -> None:
        put(f"offsets/{n}", offset_log(json.dumps({topic: {"0": offset}})))
        put(f"commits/{n}", commit)

    put("metadata", '{"id":"outage-query"}')
    batch(0, 10)
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        follow_interval_seconds=0.3,
        checkpoint_storage_options=json.dumps(server.storage_options()),
    ).start()
    path = "s3://checkpoints/job"
    try:
        follow(service, path, group)
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == {(topic, 0): 10}, 30)

        put("offsets/1", offset_log(f'{{"{topic}":{{"0":'))  # half-written
        put("commits/1", COMMIT_LOG)
        wait_for(lambda: folder_status(service, path)["errors"].get("unreadable_file"), 30)
        assert "offsets/1, line 3" in folder_status(service, path)["last_error"]
        batch(2, 30, commit="v1\n")  # the next batch's commit file cut short
        server_port = server.port
        server.stop()  # the store goes away
        wait_for(lambda: folder_status(service, path)["errors"].get("unreachable"), 30)
        assert committed_offsets(kafka_bootstrap, group) == {(topic, 0): 10}
        text = service.metrics()
        for reason in ("unreadable_file", "unreachable"):
            assert metric(text, "sidecar_followed_folder_errors_total", folder=path, reason=reason)

        restarted = S3Server()
        restarted.port, restarted.endpoint = server_port, server.endpoint
        restarted.start()  # moto keeps nothing: the sync job writes the folder again
        client = restarted.client()
        client.create_bucket(Bucket="checkpoints")
        put("metadata", '{"id":"outage-query"}')
        batch(0, 10)
        put("offsets/1", offset_log(f'{{"{topic}":{{"0":'))
        batch(2, 30, commit="v1\n")
        polls = "sidecar_followed_folder_polls_total"
        before = metric(service.metrics(), polls, folder=path) or 0
        wait_for(  # several polls of the folder as it is now: nothing Spark did not complete
            lambda: (metric(service.metrics(), polls, folder=path) or 0) >= before + 3, 30
        )
        assert committed_offsets(kafka_bootstrap, group) == {(topic, 0): 10}
        batch(1, 20)
        batch(2, 30)
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == {(topic, 0): 30}, 30)
        assert folder_status(service, path)["last_error"] is None
        restarted.stop()
    finally:
        service.stop()
        server.stop()


@pytest.mark.parametrize("where", ["abfss", "gs"])
def test_a_job_is_committed_through_its_checkpoint_on_azure_or_google_storage(
    where: str,
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """ADLS Gen2 as Spark names it (``abfss://container@account.dfs.core.windows.net/``)
    on Azurite, and ``gs://`` on fake-gcs-server, with the same job and checks as on S3."""
    store = request.getfixturevalue("azurite_server" if where == "abfss" else "gcs_server")
    fs = store.filesystem()
    bucket = f"ckpt-{uuid.uuid4().hex[:10]}"
    fs.mkdir(bucket)
    url = {
        "abfss": f"abfss://{bucket}@devstoreaccount1.dfs.core.windows.net/orders",
        "gs": f"gs://{bucket}/orders",
    }[where]
    topic = new_topic(2)
    run_sync(produce(kafka_bootstrap, topic, 700))
    group = unique_group(where)
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        follow_interval_seconds=0.5,
        checkpoint_storage_options=json.dumps(store.storage_options()),
    ).start()
    try:
        follow(service, url, group)
        put = lambda key, body: fs.pipe_file(f"{bucket}/orders/{key}", body)  # noqa: E731
        with CheckpointSync(tmp_path / "checkpoint", put) as sync:
            query = run_available_now(spark, kafka_bootstrap, [topic], tmp_path)
        assert sync.copied, "the checkpoint reached the store"
        ends = last_end_offsets(query)
        assert sum(ends.values()) == 700
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, 30, "commit")
        status = folder_status(service, url)
        assert status["last_batch_recorded"] == query.lastProgress["batchId"] >= 2
        assert status["errors"] == {}
    finally:
        service.stop()
