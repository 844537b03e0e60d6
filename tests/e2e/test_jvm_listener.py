"""The JVM listener (``jobs/jvm-listener``): jobs attached by Spark configuration alone, no
line of the job changed. One jar, built with Maven against Spark 3.5, on the classpath by
``--jars``; ``spark.sql.streaming.streamingQueryListeners`` names it; ``spark.offsetSidecar.*``
configures it. Real Spark reads a real topic, the real service commits, and the committed
offsets are read back from Kafka:

  - a PySpark job with no listener code, under ``spark-submit``, on Spark 4.2.0: the
    release's jar, taken by Spark's ``--packages`` and ``--repositories`` alone from a
    Maven repository it was deployed to (the ``maven_repository`` fixture), as the page
    attaches it;
  - a Scala job run by ``spark-shell -i`` (3.5.7, Scala 2.12, and 4.2.0, Scala 2.13: the
    same jar, the tree's, by ``--jars``);
  - a SQL-only job: a Spark Declarative Pipeline of one SQL file, ``spark-pipelines run``
    on a Connect server started with the configuration (4.2.0: Spark 3.5 cannot start a
    stream from SQL, and 4.1.1's pipelines drop the read's options, so its stream fails
    with "One of the following options must be specified for Kafka source");
  - a Spark Connect server started with the configuration (the release's jar by
    ``--packages`` too), with two Connect clients whose queries land in their own groups
    (the group template on the query's name);
  - the Python and the JVM listener in one job send the same bytes for the same progress;
  - a bad setting is one clear line in the driver's log, and the job runs on.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.machine import ROOT, answers, free_port
from harness.registries import MavenRepository
from harness.service_process import ServiceProcess
from harness.spark_drivers import connector_jars, driver_python
from spark_offset_listener import __version__
from tests.support.kafka import (
    committed_offsets,
    create_topics,
    log_ends,
    produce,
    run_sync,
    unique_group,
)
from tests.support.release import build_info
from tests.support.service import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LISTENER_CLASS = "dev.sparkoffsetsidecar.listener.OffsetCommitListener"

# A plain PySpark job: nothing of the sidecar in it.
PLAIN_JOB = """
import json, sys
from pyspark.sql import SparkSession
bootstrap, topic, checkpoint, name = sys.argv[1:5]
spark = SparkSession.builder.master("local[2]").appName("plain").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", 60).load())
query = (frame.writeStream.format("noop").queryName(name)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
query.awaitTermination()
print(json.dumps({"id": str(query.id), "batch": query.lastProgress["batchId"],
                  "spark": spark.version}))
spark.stop()
"""

SCALA_JOB = """
import org.apache.spark.sql.streaming.Trigger
val query = spark.readStream.format("kafka")
  .option("kafka.bootstrap.servers", sys.env("JOB_BOOTSTRAP"))
  .option("subscribe", sys.env("JOB_TOPIC")).option("startingOffsets", "earliest")
  .option("maxOffsetsPerTrigger", "60").load()
  .writeStream.format("noop").queryName(sys.env("JOB_NAME"))
  .option("checkpointLocation", sys.env("JOB_CHECKPOINT"))
  .trigger(Trigger.AvailableNow()).start()
query.awaitTermination()
println("JOB-RESULT " + query.id + " " + query.lastProgress.batchId)
spark.stop()
System.exit(0)
"""


@pytest.fixture(scope="session")
def listener_jar() -> str:
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-jvm-listener.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    return built.stdout.strip().splitlines()[-1]


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str) -> Iterator[ServiceProcess]:
    process = ServiceProcess(tmp_path, kafka_bootstrap).start()
    yield process
    process.stop()


def attach_conf(url: str, group: str, **more: str) -> list[str]:
    """spark-submit's arguments that attach the JVM listener: nothing else is needed."""
    conf = {
        "spark.sql.streaming.streamingQueryListeners": LISTENER_CLASS,
        "spark.offsetSidecar.url": url,
        "spark.offsetSidecar.group": group,
        **{f"spark.offsetSidecar.{k}": v for k, v in more.items()},
    }
    return [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]


def spark_bin(python: Path, tool: str) -> str:
    found = subprocess.run(
        [str(python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return str(Path(found) / "bin" / tool)


def driver(version: str) -> Path:
    """The Python of a Spark driver of ``version``: the project's own 4.2.0, else a clean
    driver environment of that version."""
    return Path(sys.executable) if version == "4.2.0" else driver_python(version)


def jars_with(python: Path, listener_jar: str, *, connect: bool = False) -> str:
    """``--jars``: the Kafka connector of ``python``'s pyspark, and the listener."""
    return ",".join([*connector_jars(python, connect=connect), listener_jar])


@dataclass(frozen=True)
class Package:
    """The JVM listener as Maven coordinates in a repository: what ``--packages`` takes."""

    version: str
    repository: str
    home: Path  # the driver's user.home: no Ivy cache, no ~/.m2 of this machine's

    def arguments(self) -> list[str]:
        coordinates = f"dev.sparkoffsetsidecar:spark-offset-sidecar-listener:{self.version}"
        return ["--packages", coordinates, "--repositories", self.repository]

    def env(self) -> dict[str, str]:
        tool = os.environ.get("JAVA_TOOL_OPTIONS", "")
        return {"JAVA_TOOL_OPTIONS": f"{tool} -Duser.home={self.home}".strip()}


@pytest.fixture
def package(published_release: Path, maven_repository: MavenRepository, tmp_path: Path) -> Package:
    """The release's JVM listener, deployed to this session's Maven repository."""
    version = build_info(published_release)["version"]
    return Package(version, maven_repository.url, tmp_path / "home")


def attach(python: Path, listener: str | Package, *, connect: bool = False) -> list[str]:
    """spark-submit's arguments that put the listener on the classpath: a jar of the
    tree's by ``--jars``, or the release's by ``--packages`` (the Kafka connector by
    ``--jars`` either way)."""
    if isinstance(listener, Package):
        return ["--jars", ",".join(connector_jars(python, connect=connect)), *listener.arguments()]
    return ["--jars", jars_with(python, listener, connect=connect)]


def resolved_from(log: str, package: Package) -> None:
    """Spark's Ivy took the listener's jar from the package's repository."""
    path = f"dev/sparkoffsetsidecar/spark-offset-sidecar-listener/{package.version}"
    jar = f"{path}/spark-offset-sidecar-listener-{package.version}.jar"
    assert f"downloading {package.repository}{jar}" in log, log[-4000:]


def assert_committed(
    service: ServiceProcess,
    bootstrap: str,
    group: str,
    ends: dict[tuple[str, int], int],
    query_id: str,
    batch: int,
) -> None:
    """The group at the topic's end in Kafka, and the service's view of the query."""
    wait_for(lambda: committed_offsets(bootstrap, group) == ends, 60, f"{group}'s commit")
    view = service.http.get(f"/v1/queries/{query_id}").json()
    assert view["group_id"] == group
    assert view["last_completed_checkpoint"] == batch


def topic_with_records(bootstrap: str, prefix: str, count: int = 200) -> str:
    topic = f"{prefix}-{free_port()}"
    run_sync(create_topics(bootstrap, [topic], 2))
    run_sync(produce(bootstrap, topic, count))
    return topic


def submit(
    python: Path, args: list[str], tmp_path: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [spark_bin(python, "spark-submit"), "--master", "local[2]", *args],
        cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": str(python), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


# 4.2.0 only: on 3.5.7 the Scala job below attaches by configuration alone, and the Connect
# server takes the release by --packages (the time this case took pays for
# tests/e2e/test_registries.py).
@pytest.mark.parametrize("version", ["4.2.0"])
def test_a_pyspark_job_without_listener_code_is_committed_by_configuration_alone(
    version: str,
    package: Package,
    service: ServiceProcess,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    python = driver(version)
    topic = topic_with_records(kafka_bootstrap, f"jvm-{version}")
    name = unique_group(f"plain{version.replace('.', '')}")
    (tmp_path / "job.py").write_text(PLAIN_JOB)
    ends = log_ends(kafka_bootstrap, [topic])
    done = submit(
        python,
        [*attach(python, package), *attach_conf(service.url, "jvm-{queryName}"),
         str(tmp_path / "job.py"), kafka_bootstrap, topic, str(tmp_path / "checkpoint"), name],
        tmp_path,
        **package.env(),
    )  # fmt: skip
    resolved_from(done.stderr, package)
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran["spark"] == version
    assert ran["batch"] >= 3  # 200 records, 60 a batch
    assert_committed(service, kafka_bootstrap, f"jvm-{name}", ends, ran["id"], ran["batch"])


@pytest.mark.parametrize("version", ["3.5.7", "4.2.0"])
def test_a_scala_job_in_spark_shell_is_committed_by_configuration_alone(
    version: str,
    listener_jar: str,
    service: ServiceProcess,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    python = driver(version)
    topic = topic_with_records(kafka_bootstrap, "jvm-scala")
    name = unique_group("scala")
    (tmp_path / "job.scala").write_text(SCALA_JOB)
    ends = log_ends(kafka_bootstrap, [topic])
    jars = jars_with(python, listener_jar)
    shell = subprocess.run(
        [spark_bin(python, "spark-shell"), "--master", "local[2]", "--jars", jars,
         *attach_conf(service.url, "{queryName}"), "-i", str(tmp_path / "job.scala")],
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
        env={**os.environ, "JOB_BOOTSTRAP": kafka_bootstrap, "JOB_TOPIC": topic,
             "JOB_NAME": name, "JOB_CHECKPOINT": str(tmp_path / "checkpoint")},
    )  # fmt: skip
    result = [line for line in shell.stdout.splitlines() if line.startswith("JOB-RESULT ")]
    assert result, shell.stdout[-3000:] + shell.stderr[-3000:]
    query_id, batch = result[-1].split()[1:3]
    assert_committed(service, kafka_bootstrap, name, ends, query_id, int(batch))


CONNECT_JOB = PLAIN_JOB.replace(
    'SparkSession.builder.master("local[2]").appName("plain").getOrCreate()',
    "SparkSession.builder.remote(sys.argv[5]).getOrCreate()",
).replace('spark.sparkContext.setLogLevel("WARN")', "")


@contextlib.contextmanager
def connect_server(
    version: str, listener: str | Package, service_url: str, folder: Path, *more_conf: str
) -> Iterator[str]:
    """A Spark Connect server of ``version`` started with the listener (``attach``) and
    its configuration (and ``more_conf``, spark-submit arguments), in ``folder``: every
    client session gets the listener, none of them knows it. (4.x wheels ship the
    server's jar; 3.5's comes from Maven Central.)"""
    python = driver(version)
    port = free_port()
    more_env = listener.env() if isinstance(listener, Package) else {}
    log_path = folder / "connect-server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [spark_bin(python, "spark-submit"), "--master", "local[2]",
             "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             *attach(python, listener, connect=True),
             *attach_conf(service_url, "connect-{queryName}"), *more_conf, "spark-internal"],
            cwd=folder, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYSPARK_PYTHON": str(python), **more_env},
        )  # fmt: skip
        try:
            wait_for(lambda: answers(port) or server.poll() is not None, 180, "Connect server")
            assert server.poll() is None, log_path.read_text()[-3000:]
            if isinstance(listener, Package):
                resolved_from(log_path.read_text(), listener)
            yield f"sc://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(60)


@pytest.mark.parametrize("version", ["3.5.7", "4.2.0"])
def test_a_connect_server_started_with_the_configuration_commits_each_clients_group(
    version: str,
    package: Package,
    service: ServiceProcess,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """Two Connect clients (``pyspark[connect]`` of the server's version, nothing of the
    sidecar installed), each with its own named query on its own topic, at once: each
    lands in its own group."""
    client = driver_python(version, "connect")
    (tmp_path / "job.py").write_text(CONNECT_JOB)
    with connect_server(version, package, service.url, tmp_path) as remote:
        runs = []
        for which in ("a", "b"):
            topic = topic_with_records(
                kafka_bootstrap, f"jvm-connect-{which}", 120 + 60 * len(runs)
            )
            name = unique_group(f"client{which}")
            job = subprocess.Popen(
                [str(client), str(tmp_path / "job.py"), kafka_bootstrap, topic,
                 str(tmp_path / f"checkpoint-{which}"), name, remote],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            runs.append((topic, name, job))
        finished = [(topic, name, *job.communicate(timeout=300), job.returncode)
                    for topic, name, job in runs]  # fmt: skip
    for topic, name, out, err, code in finished:
        assert code == 0, err[-3000:]
        ran = json.loads(out.strip().splitlines()[-1])
        assert ran["spark"] == version
        ends = log_ends(kafka_bootstrap, [topic])
        assert_committed(service, kafka_bootstrap, f"connect-{name}", ends, ran["id"], ran["batch"])


# A SQL-only job. Spark's SQL starts a stream only in a Spark Declarative Pipeline (4.1 and
# later): ``spark-pipelines run`` runs the SQL files its spec names, through Spark Connect.
# Spark has no Kafka table function in SQL, so a catalog table ``USING kafka`` names the
# source, made once in a persistent catalog (here Hive's, on Derby in the job's folder) by
# ``spark-sql``, and the read's ``WITH`` options say what to read. The SQL sets
# ``useV1SourceList`` without Kafka, so that the table is read through Kafka's DataSource
# V2: the V1 path refuses a catalog table ("Kafka source has a fixed schema and cannot be
# set with a custom one").
#
# The pipeline runs on a Connect server started with the listener's configuration, as a
# platform team runs one for many jobs. Not ``spark-pipelines run --conf ...`` with its own
# local server: PySpark 4.1.1 and 4.2.0 hand the confs to that server in groups of ten
# (PYSPARK_REMOTE_INIT_CONF_0, _1, ...) and keep only the last group, so most of them,
# --jars included, are silently lost.
HIVE_CATALOG = ["--conf", "spark.sql.catalogImplementation=hive"]
KAFKA_V2 = "SET spark.sql.sources.useV1SourceList=avro,csv,json,orc,parquet,text;\n"
KAFKA_TABLE = KAFKA_V2 + "CREATE TABLE kafka_source USING kafka;"
PIPELINE_SPEC = """name: sql-only
storage: {storage}
libraries:
  - glob:
      include: transformations/**
"""
PIPELINE_SQL = (
    KAFKA_V2
    + """CREATE STREAMING TABLE {table} AS
SELECT CAST(value AS STRING) AS value FROM STREAM(kafka_source) WITH (
  'kafka.bootstrap.servers' = '{bootstrap}', 'subscribe' = '{topic}',
  'startingOffsets' = 'earliest', 'maxOffsetsPerTrigger' = '60');
"""
)


@pytest.mark.parametrize("version", ["4.2.0"])
def test_a_sql_only_pipeline_is_committed_by_configuration_alone(
    version: str,
    listener_jar: str,
    service: ServiceProcess,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """A pipeline of one SQL file, no line of Python or Scala, on a Connect server started
    with the listener's configuration: its streaming table's flow lands in its group."""
    client = driver_python(version, "pipelines")
    topic = topic_with_records(kafka_bootstrap, "jvm-sql")
    ends = log_ends(kafka_bootstrap, [topic])
    table_name = unique_group("copied").replace("-", "_")  # the query's name, hence its group
    catalog = [*HIVE_CATALOG, "--conf", f"spark.sql.warehouse.dir={tmp_path / 'warehouse'}"]
    table = subprocess.run(
        [spark_bin(client, "spark-sql"), "--master", "local[1]",
         "--jars", ",".join(connector_jars(client)), *catalog, "-e", KAFKA_TABLE],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr[-3000:]
    (tmp_path / "spark-pipeline.yml").write_text(
        PIPELINE_SPEC.format(storage=(tmp_path / "storage").as_uri())
    )
    (tmp_path / "transformations").mkdir()
    (tmp_path / "transformations" / "copy.sql").write_text(
        PIPELINE_SQL.format(table=table_name, bootstrap=kafka_bootstrap, topic=topic)
    )
    with connect_server(version, listener_jar, service.url, tmp_path, *catalog) as remote:
        pipeline = subprocess.run(
            [spark_bin(client, "spark-pipelines"), "run", "--remote", remote],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYSPARK_PYTHON": str(client)},
        )  # fmt: skip
    events = pipeline.stdout + pipeline.stderr
    assert pipeline.returncode == 0, events[-4000:]
    flow = f"spark_catalog.default.{table_name}"
    assert f"Flow {flow} has COMPLETED" in events, events[-4000:]
    [query] = service.http.get("/v1/queries").json()
    assert query["last_completed_checkpoint"] >= 3  # 200 records, 60 a batch
    assert_committed(
        service, kafka_bootstrap, f"connect-{flow}", ends,
        query["query_id"], query["last_completed_checkpoint"],
    )  # fmt: skip


class Capture(ThreadingHTTPServer):
    """A stand-in service that keeps every body posted to /v1/progress, in arrival order,
    and the User-Agents that posted them."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.agents: set[str] = set()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                capture.agents.add(self.headers.get("User-Agent", ""))
                capture.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"outcome":"accepted"}')

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ClosingCapture(Capture):
    """A stand-in service that keeps connections open (HTTP/1.1) and, once, reads a posted
    event and closes the connection without answering it: what a client meets when the
    service closes a kept-alive connection as the client sends on it."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_under: list[bytes] = []
        capture = self
        plain = self.RequestHandlerClass

        class Handler(plain):  # type: ignore[valid-type, misc]
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                if len(capture.bodies) == 1 and not capture.closed_under:
                    capture.closed_under.append(
                        self.rfile.read(int(self.headers["Content-Length"]))
                    )
                    self.close_connection = True  # no answer: the socket just closes
                    return
                super().do_POST()
                self.wfile.flush()

            def end_headers(self) -> None:
                self.send_header("Content-Length", str(len(b'{"outcome":"accepted"}')))
                super().end_headers()

        self.RequestHandlerClass = Handler


BOTH_LISTENERS_JOB = PLAIN_JOB.replace(
    'spark.sparkContext.setLogLevel("WARN")',
    'spark.sparkContext.setLogLevel("WARN")\n'
    "from spark_offset_listener.listener import OffsetCommitListener\n"
    "spark.streams.addListener(\n"
    "    OffsetCommitListener(sys.argv[5], group_prefix='same-', cluster='eu-west')\n"
    ")",
)


def test_the_python_and_the_jvm_listener_send_the_same_body_for_the_same_progress(
    listener_jar: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """One job with both listeners, each posting to its own capture server: for every
    batch the two bodies are the same bytes (a group name with quotes, a backslash and
    non-ASCII text shows the JSON escaping matches too), the Kafka cluster each names
    included."""
    python_side, jvm_side = Capture(), Capture()
    try:
        topic = topic_with_records(kafka_bootstrap, "jvm-same")
        name = 'q "café" \\ ' + unique_group("same")
        (tmp_path / "job.py").write_text(BOTH_LISTENERS_JOB)
        python = Path(sys.executable)
        jars = jars_with(python, listener_jar)
        submit(
            python,
            ["--jars", jars, *attach_conf(jvm_side.url, "same-{queryName}", cluster="eu-west"),
             str(tmp_path / "job.py"), kafka_bootstrap, topic, str(tmp_path / "checkpoint"),
             name, python_side.url],
            tmp_path,
            PYTHONPATH=str(ROOT / "jobs"),
        )  # fmt: skip
        # each sender keeps only a query's newest unsent event, so either may skip a
        # batch; the last one both deliver (a terminated query is flushed)
        python_bodies = {json.loads(b)["progress"]["batchId"]: b for b in python_side.bodies}
        jvm_bodies = {json.loads(b)["progress"]["batchId"]: b for b in jvm_side.bodies}
        last = max(jvm_bodies)
        assert last >= 3, sorted(jvm_bodies)
        assert max(python_bodies) == last, (sorted(python_bodies), sorted(jvm_bodies))
        for batch in python_bodies.keys() & jvm_bodies.keys():
            assert python_bodies[batch] == jvm_bodies[batch], f"batch {batch}"
        assert json.loads(jvm_bodies[last])["group_id"] == f"same-{name}"
        assert json.loads(jvm_bodies[last])["cluster"] == "eu-west"  # each names its cluster
        # each names its release (releases.toml's, in the package and the jar's manifest)
        (jvm_agent,) = jvm_side.agents
        assert jvm_agent.startswith(f"spark-offset-sidecar-listener/{__version__} Java/"), jvm_agent
        (python_agent,) = python_side.agents
        assert python_agent.startswith(f"spark-offset-listener/{__version__} Python/"), python_agent
    finally:
        python_side.shutdown()
        jvm_side.shutdown()


def test_a_bad_setting_is_one_clear_line_and_the_job_runs_on(
    listener_jar: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    python = Path(sys.executable)
    topic = topic_with_records(kafka_bootstrap, "jvm-bad", 50)
    (tmp_path / "job.py").write_text(PLAIN_JOB)
    jars = jars_with(python, listener_jar)
    done = submit(
        python,
        ["--jars", jars,
         *attach_conf("http://127.0.0.1:1", "g", timeoutMs="soon"),
         str(tmp_path / "job.py"), kafka_bootstrap, topic, str(tmp_path / "checkpoint"), "bad"],
        tmp_path,
    )  # fmt: skip
    assert json.loads(done.stdout.strip().splitlines()[-1])["batch"] >= 0
    lines = [line for line in done.stderr.splitlines() if "spark-offset-sidecar" in line]
    assert any(
        "listener disabled: spark.offsetSidecar.timeoutMs must be a whole number above 0, "
        "got 'soon'" in line
        for line in lines
    ), done.stderr[-3000:]


def test_a_connection_closed_under_an_event_is_sent_again_at_once_and_quietly(
    listener_jar: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The JVM listener's client keeps connections open; the service closes idle ones. An
    event sent on a connection closed under it is sent again at once on a new one: the
    batch arrives, and the driver's log has no "cannot reach" line (before, it warned the
    service was unreachable and waited out a backoff)."""
    server = ClosingCapture()
    try:
        python = Path(sys.executable)
        topic = topic_with_records(kafka_bootstrap, "jvm-closed", 200)
        (tmp_path / "job.py").write_text(PLAIN_JOB)
        done = submit(
            python,
            ["--jars", jars_with(python, listener_jar), *attach_conf(server.url, "closed"),
             str(tmp_path / "job.py"), kafka_bootstrap, topic, str(tmp_path / "checkpoint"),
             "closed"],
            tmp_path,
        )  # fmt: skip
        last = json.loads(done.stdout.strip().splitlines()[-1])["batch"]
        assert len(server.closed_under) == 1, "the stand-in closed no connection under an event"
        dropped = json.loads(server.closed_under[0])["progress"]["batchId"]
        delivered = [json.loads(body)["progress"]["batchId"] for body in server.bodies]
        assert dropped in delivered, (dropped, delivered)  # sent again, not superseded
        assert max(delivered) == last, (delivered, last)
        unreachable = [line for line in done.stderr.splitlines() if "cannot reach" in line]
        assert unreachable == [], unreachable
    finally:
        server.shutdown()
