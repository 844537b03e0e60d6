"""The wire contract between releases, both ways: the previous release's listeners (its
Python listener and its JVM listener, ``releases.toml``'s previous release rebuilt from
git: the ``previous_release`` fixture) against this service, and this release's listeners
against the previous release's service. A job attached on one side while the operators
upgrade the other must go on being committed.

Each case is one real PySpark job (spark-submit, the project's pyspark), read from a real
topic, with both listeners attached: the Python one in code, the JVM one by configuration
(``--jars``, ``spark.sql.streaming.streamingQueryListeners``). One listener is the
previous release's and posts to this release's service, the other is this release's and
posts to the previous release's service, so two jobs cover the four directions (a query
belongs to one group in a service, so the two listeners of one job go to two services).
Each service is behind a recording proxy: every answer either listener got is seen.
Checked: every answer 2xx, each group committed in Kafka at the topic's end (read by the
test's own client), each service's view of the query at the job's last batch, and
nothing counted invalid."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.releases import BuiltRelease
from harness.service_process import ServiceProcess
from harness.spark_drivers import jvm_listener_jar
from spark_offset_sidecar import __version__
from tests.e2e.test_jvm_listener import attach_conf, jars_with, submit, topic_with_records
from tests.support.kafka import committed_offsets, log_ends, unique_group
from tests.support.recording_proxy import RecordingProxy
from tests.support.service import metric_sum, wait_for

# The module's two services are started once: its tests run on one worker.
pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.xdist_group("release-compat")]

# A plain job with the Python listener attached in code: the previous release's when its
# unpacked wheel is given (first on sys.path), else this checkout's.
JOB = """
import json, sys
listener_path, url, group, bootstrap, topic, checkpoint = sys.argv[1:7]
if listener_path != "-":
    sys.path.insert(0, listener_path)
import spark_offset_listener
from spark_offset_listener.listener import OffsetCommitListener
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").appName("compat").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
spark.streams.addListener(OffsetCommitListener(url, group_id=group))
query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", 60).load()
         .writeStream.format("noop").option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
query.awaitTermination()
print(json.dumps({"id": str(query.id), "batch": query.lastProgress["batchId"],
                  "listener": spark_offset_listener.__file__}))
spark.stop()
"""


class Side:
    """One release's service behind a recording proxy."""

    def __init__(self, service: ServiceProcess) -> None:
        self.service = service.start()
        self.proxy = RecordingProxy(service.url)

    def close(self) -> None:
        self.proxy.close()
        self.service.stop()


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str, previous_release: BuiltRelease
) -> Iterator[dict[str, Side]]:
    """This release's service and the previous release's, each on a SQLite file of its own."""
    this = ServiceProcess(tmp_path_factory.mktemp("this"), kafka_bootstrap)
    previous = ServiceProcess(
        tmp_path_factory.mktemp("previous"), kafka_bootstrap, python=previous_release.python
    )
    sides: dict[str, Side] = {}
    try:
        sides["this"] = Side(this)
        sides["previous"] = Side(previous)
        yield sides
    finally:
        for side in sides.values():
            side.close()


@pytest.mark.parametrize(
    "python_listener",
    ["previous", "this"],
    ids=["previous-python-this-jvm", "this-python-previous-jvm"],
)
def test_each_release_s_listeners_are_committed_by_the_other_release_s_service(
    python_listener: str,
    services: dict[str, Side],
    previous_release: BuiltRelease,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    jvm_listener = "this" if python_listener == "previous" else "previous"
    other = {"this": "previous", "previous": "this"}
    python_side, jvm_side = services[other[python_listener]], services[other[jvm_listener]]
    jar = str(previous_release.listener_jar if jvm_listener == "previous" else jvm_listener_jar())
    listener_path = str(previous_release.listener_path) if python_listener == "previous" else "-"
    topic = topic_with_records(kafka_bootstrap, "compat")
    ends = log_ends(kafka_bootstrap, [topic])
    python_group, jvm_group = unique_group("compat-py"), unique_group("compat-jvm")
    python_seen, jvm_seen = len(python_side.proxy.posted()), len(jvm_side.proxy.posted())
    (tmp_path / "job.py").write_text(JOB)
    python = Path(sys.executable)
    done = submit(
        python,
        ["--jars", jars_with(python, jar), *attach_conf(jvm_side.proxy.url, jvm_group),
         str(tmp_path / "job.py"), listener_path, python_side.proxy.url, python_group,
         kafka_bootstrap, topic, str(tmp_path / "checkpoint")],
        tmp_path,
    )  # fmt: skip
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran["batch"] >= 3  # 200 records, 60 a batch
    if python_listener == "previous":
        assert ran["listener"].startswith(str(previous_release.listener_path)), ran
    else:
        assert not ran["listener"].startswith(str(previous_release.folder)), ran

    for side, group in ((python_side, python_group), (jvm_side, jvm_group)):
        wait_for(lambda g=group: committed_offsets(kafka_bootstrap, g) == ends, 60, f"{group}")
        view = side.service.query(ran["id"])
        assert (view["group_id"], view["last_completed_checkpoint"]) == (group, ran["batch"])
    python_posts = python_side.proxy.posted()[python_seen:]
    jvm_posts = jvm_side.proxy.posted()[jvm_seen:]
    for release, posts in ((python_listener, python_posts), (jvm_listener, jvm_posts)):
        assert len(posts) >= ran["batch"] + 1, posts  # one progress a batch, 0 to batch
        assert {e.status for e in posts} <= {200, 201, 202}, posts
        agents = {e.user_agent for e in posts}
        # This release's listeners name it; the previous release's do not.
        named = {f"/{__version__} " in agent for agent in agents}
        assert named == {release == "this"}, (release, agents)
    for side in (python_side, jvm_side):
        text = wait_for(  # the groups' counters come with the memory its watcher is told
            lambda s=side: (
                (t := s.service.metrics())
                and metric_sum(t, "sidecar_events_total", outcome="accepted") >= ran["batch"] + 1
                and t
            ),
            what="every accepted event counted",
        )
        assert metric_sum(text, "sidecar_events_invalid_total") == 0
    print(
        f"\n{python_listener} Python listener -> {other[python_listener]} service: "
        f"{len(python_posts)} answers {_statuses(python_posts)}; {jvm_listener} JVM listener -> "
        f"{other[jvm_listener]} service: {len(jvm_posts)} answers {_statuses(jvm_posts)}"
    )


def _statuses(posts: list[Any]) -> dict[int, int]:
    counted: dict[int, int] = {}
    for exchange in posts:
        counted[exchange.status] = counted.get(exchange.status, 0) + 1
    return counted
