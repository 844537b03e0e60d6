"""Fixtures shared by every layer of the tests: the real broker, topics, PySpark, PostgreSQL
and the database URLs (helpers are in ``tests.support``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from harness import kafka_broker
from harness.machine import refuse_in_inner_loop
from tests.support.fuzz import ast_parse_mismatch_retried
from tests.support.kafka import create_topics, run_sync

# No time limit on a generated example: the machines are shared, and a test that fails
# on a slow moment says nothing of the code (a property's examples still all run).
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")


@pytest.fixture(scope="session", autouse=True)
def python_ast_retried() -> Iterator[None]:
    """Hypothesis parses lambdas' source while it draws: see ast_parse_mismatch_retried."""
    with ast_parse_mismatch_retried():
        yield


# Every JVM the suite starts (brokers, Spark drivers, spark-shell, Spark Connect servers)
# compiles with the JIT's first tier only and collects with the serial collector: a test's
# JVM lives seconds to minutes on a small heap, where the second tier's compilations and
# G1's concurrent threads are much of its CPU, and the suite's workers share two cores
# (docs/decisions.md, "Test JVMs: the JIT's first tier, the serial collector"). What a
# test proves depends on neither; the benchmarks (python -m bench, outside pytest) keep
# the JVM's defaults. A value already set wins.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# What a test needs, read from the fixtures it uses: ``make check`` deselects these
# markers (``-m "not kafka and not spark and not container and not tools"``), so a test
# that uses a broker or a program of the machine through a fixture cannot be left
# unmarked by mistake. ``tools``: PostgreSQL, Azurite, helm, promtool, Prometheus,
# Chromium: what ``make tools`` installs beside the virtualenv.
NEEDS = {
    "kafka": {"broker", "kafka_bootstrap", "new_topic", "private_broker", "cluster"},
    "spark": {"spark"},
    "tools": {
        "postgres_server",
        "azurite_server",
        "stores",
        "release_folder",
        "published_release",
        "previous_release",
        "package_index",
        "maven_repository",
        "oci_registry",
    },
    # make dist builds the image (podman), the chart (helm); the OCI registry takes them
    "container": {"release_folder", "published_release", "oci_registry"},
}

TOOL_PARAMS = {"postgresql", "postgres", "abfs", "abfss"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in NEEDS.items():
            if used & fixtures:
                item.add_marker(marker)
        # A parameter that picks PostgreSQL or Azure storage (the fixture is then taken
        # by request.getfixturevalue, out of fixturenames' sight).
        # The first test to ask for the release folder builds it (make dist: minutes on a
        # machine whose caches are empty), and others wait for it: beyond one test's bound.
        if used & {"release_folder", "published_release"}:
            item.add_marker(pytest.mark.timeout(1800))
        callspec = getattr(item, "callspec", None)
        if callspec is not None and TOOL_PARAMS & {str(v) for v in callspec.params.values()}:
            item.add_marker("tools")
    # The long tests first (a minute and more: marked ``long``), then the Spark tests (each
    # 10-60 s): pytest-xdist hands tests out in this order, so the long ones start early
    # and the short ones fill the workers' ends.
    # One test that needs the release folder goes first of all: its worker builds the
    # folder (make dist, syft built first on a new machine: minutes) while the others run.
    # A module whose fixture starts a broker or a service once (scope="module") keeps the
    # tests on it in one xdist_group: spread over the workers, each worker started its own.
    # A group is handed out where its first test stands (make test: --no-loadscope-reorder).
    builds = next((i for i in items if "release_folder" in getattr(i, "fixturenames", ())), None)
    items.sort(
        key=lambda item: (
            item is not builds,
            item.get_closest_marker("long") is None,
            item.get_closest_marker("spark") is None,
        )
    )


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_broker.LocalBroker]:
    """The real broker of this session (of each xdist worker), started in an empty folder
    on a free port; ``OFFSET_SIDECAR_TEST_KAFKA=host:port`` reuses a running one instead."""
    local = kafka_broker.for_tests(tmp_path_factory.mktemp("kafka"))
    yield local
    if local.started_here:
        local.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(broker: kafka_broker.LocalBroker) -> str:
    return broker.bootstrap


@pytest.fixture
def new_topic(kafka_bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a topic named after the test, unique per call."""

    def make(partitions: int = 1) -> str:
        base = request.node.name.replace("[", "-").replace("]", "")[:60]
        name = f"t-{base}-{uuid.uuid4().hex[:8]}"
        run_sync(create_topics(kafka_bootstrap, [name], partitions))
        return name

    return make


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A real local SparkSession with Spark's own Kafka connector (shared per session)."""
    from jobs.spark_session import kafka_spark_session

    refuse_in_inner_loop("starts Spark")
    session = kafka_spark_session("sidecar-tests")
    yield session
    session.stop()


@pytest.fixture
def private_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_broker.LocalBroker]:
    """A broker of this test's own, for tests that pause or stop it."""
    local = kafka_broker.brand_new(tmp_path_factory.mktemp("kafka"))
    yield local
    local.resume()
    local.stop()


@pytest.fixture(scope="session")
def release_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release folder ``make dist`` makes, built once per test run for every worker
    (``tests.support.release``)."""
    from tests.support.release import make_release_folder

    return make_release_folder(tmp_path_factory)


@pytest.fixture(scope="session")
def published_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The newest release's folder, the version the manual's procedures name: this tree's
    when it is that release, else rebuilt from its recorded commit and held to its recorded
    checksums (``tests.support.release``)."""
    from tests.support.release import newest_release_folder

    return newest_release_folder(tmp_path_factory)


@pytest.fixture(scope="session")
def previous_release() -> object:
    """The release before this tree's (``releases.toml``), built from git at its recorded
    commit once per machine and installed in a virtualenv of its own (``harness.releases``):
    its service (``python``), its Python listener and its JVM listener's jar."""
    from harness.releases import built_release, previous_release

    refuse_in_inner_loop("builds the previous release (git, uv, Maven)")
    return built_release(previous_release())


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A real PostgreSQL server, started once per session."""
    from harness.postgres_server import PostgresServer

    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """Each store test runs on a SQLite file and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sidecar.db"
    server = request.getfixturevalue("postgres_server")
    server.reset()
    return str(server.url)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[object]:
    """A real S3-compatible server process (moto in server mode), one per session."""
    from harness.s3_server import S3Server

    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[object]:
    """Azurite's blob service (Azure Blob / ADLS Gen2), one per session."""
    from harness.object_stores import AzuriteServer

    server = AzuriteServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[object]:
    """fake-gcs-server (Google Cloud Storage's JSON API), one per session."""
    from harness.object_stores import FakeGcsServer

    server = FakeGcsServer().start()
    yield server
    server.stop()


# The release published to registry servers of this session (each started, and the
# release published to it, the first time a test asks: tests/support/registries.py).


@pytest.fixture(scope="session")
def package_index(
    published_release: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """A package index (pypiserver) holding the release's wheels and sdist, uploaded by
    twine; what it does not hold it takes from PyPI."""
    from harness.registries import PackageIndex
    from tests.support.registries import publish_python

    index = PackageIndex(tmp_path_factory.mktemp("pypi") / "packages").start()
    try:
        publish_python(published_release, index)
        yield index
    finally:
        index.stop()


@pytest.fixture(scope="session")
def maven_repository(
    published_release: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """A Maven repository over HTTP holding the JVM listener, deployed by Maven."""
    from harness.registries import MavenRepository
    from tests.support.registries import publish_jvm

    repository = MavenRepository(tmp_path_factory.mktemp("maven") / "repository")
    publish_jvm(published_release, repository)
    repository.start()
    yield repository
    repository.stop()


@pytest.fixture(scope="session")
def oci_registry(
    published_release: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """An OCI registry (crane's) holding the release's image (crane push) and chart
    (helm push)."""
    from harness.registries import OciRegistry
    from tests.support.registries import publish_oci

    folder = tmp_path_factory.mktemp("oci")
    registry = OciRegistry(folder / "blobs").start()
    try:
        publish_oci(published_release, registry, folder)
        yield registry
    finally:
        registry.stop()
