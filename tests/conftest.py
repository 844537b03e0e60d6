from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests import kafka_broker

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync or async test code alike."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture(scope="session")
def broker() -> Iterator[kafka_broker.LocalBroker]:
    """The real broker, started once per session unless one already answers."""
    local = kafka_broker.acquire()
    yield local
    if local.started_here:
        local.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(broker: kafka_broker.LocalBroker) -> str:
    return broker.bootstrap


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1) for name in names]
        )
    finally:
        await admin.close()


@pytest.fixture
def new_topic(kafka_bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a topic named after the test, unique per call."""

    def make(partitions: int = 1) -> str:
        base = request.node.name.replace("[", "-").replace("]", "")[:60]
        name = f"t-{base}-{uuid.uuid4().hex[:8]}"
        run_sync(create_topics(kafka_bootstrap, [name], partitions))
        return name

    return make


def unique_group(prefix: str = "g") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A real local SparkSession with Spark's own Kafka connector (shared per session)."""
    from jobs.spark_session import kafka_spark_session

    session = kafka_spark_session("sidecar-tests")
    yield session
    session.stop()


async def read_committed(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed offsets and metadata, as the broker reports them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): (meta.offset, meta.metadata) for tp, meta in found.items()}


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    return {tp: offset for tp, (offset, _) in run_sync(read_committed(bootstrap, group)).items()}


@pytest.fixture
def private_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_broker.LocalBroker]:
    """A broker of this test's own, for tests that pause or stop it."""
    from tests.service_process import free_port

    port = free_port()
    state = tmp_path_factory.mktemp("kafka")
    local = kafka_broker.LocalBroker(f"127.0.0.1:{port}", port, state, started_here=True)
    local.start()
    yield local
    local.resume()
    local.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A real PostgreSQL server, started once per session."""
    from tests.postgres_server import PostgresServer

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
