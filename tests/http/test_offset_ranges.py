"""Kafka's protocol bounds, over the whole integer range: a partition id is an int32 >= 0,
an offset (and a checkpoint / batch id) an int64 >= 0. Anything else is refused with 422
naming the field, on every route that takes them, and nothing is stored; anything inside
is accepted. (Before: partition 2**31 was accepted and poisoned every later commit of
its group.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import MAX_OFFSET, MAX_PARTITION
from spark_offset_sidecar.core.spark.progress import kafka_offsets
from spark_offset_sidecar.errors import InvalidEvent
from spark_offset_sidecar.settings import DatabaseSettings, Settings
from tests.support.app import doubles
from tests.support.fuzz import examples
from tests.support.service import spark_progress

# The whole range, with the edges of both bounds drawn often.
EDGES = [-1, 0, MAX_PARTITION, MAX_PARTITION + 1, MAX_OFFSET, MAX_OFFSET + 1, 2**64, -(2**63)]
INTEGERS = st.one_of(st.sampled_from(EDGES), st.integers(), st.integers(-(2**70), 2**70))


def partition_ok(partition: int) -> bool:
    return 0 <= partition <= MAX_PARTITION


def offset_ok(offset: int) -> bool:
    return 0 <= offset <= MAX_OFFSET


@given(partition=INTEGERS, offset=INTEGERS)
def test_the_parser_accepts_exactly_kafkas_ranges(partition: int, offset: int) -> None:
    nested = {"orders": {str(partition): offset}}
    if partition_ok(partition) and offset_ok(offset):
        assert kafka_offsets(nested, "offsets") == {("orders", partition): offset}
    else:
        with pytest.raises(InvalidEvent) as refused:
            kafka_offsets(nested, "offsets")
        assert refused.value.field == f"offsets.orders.{partition}"
        bound = "partition" if not partition_ok(partition) else "offset"
        assert bound in refused.value.problem


# The tests on the module's app (made once) run on one worker.
ON_MODULE_APP = pytest.mark.xdist_group("http-offset-ranges")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder: Path = tmp_path_factory.mktemp("ranges")
    settings = Settings(database=DatabaseSettings(url=f"sqlite:///{folder / 'sidecar.db'}"))
    app = create_app(settings, doubles(settings))
    with TestClient(app) as test_client:
        yield test_client


def _post(client: TestClient, route: str, query: str, offsets: Any, batch: int = 1) -> Any:
    group = f"g-{query}"
    if route == "progress":
        return client.post(
            "/v1/progress",
            json={"group_id": group, "progress": spark_progress(batch, offsets, query)},
        )
    if route == "progress (endOffset as a string)":
        progress = spark_progress(batch, offsets, query)
        progress["sources"][1]["endOffset"] = json.dumps(offsets)  # as a Python listener sees it
        return client.post("/v1/progress", json={"group_id": group, "progress": progress})
    return client.post(
        f"/v1/queries/{query}/checkpoints",
        json={"checkpoint_id": batch, "group_id": group, "offsets": offsets},
    )


ROUTES = ["progress", "progress (endOffset as a string)", "checkpoints"]


@ON_MODULE_APP
@pytest.mark.parametrize("route", ROUTES)
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(partition=INTEGERS, offset=INTEGERS)
def test_every_route_that_takes_offsets_refuses_outside_kafkas_ranges(
    client: TestClient, route: str, partition: int, offset: int
) -> None:
    query = uuid.uuid4().hex
    valid = {"orders": {"0": 7}}
    answer = _post(client, route, query, {**valid, "payments": {str(partition): offset}})
    if partition_ok(partition) and offset_ok(offset):
        assert answer.status_code == 200, answer.text
        assert answer.json()["outcome"] == "accepted"
        return
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["outcome"] == "invalid"
    assert f"payments.{partition}" in body["detail"], body
    problem = "partition must be" if not partition_ok(partition) else "offset must be"
    assert problem in body["detail"], body
    # Nothing of the refused event was stored, not even its valid partitions.
    assert client.get(f"/v1/queries/{query}").status_code == 404


@ON_MODULE_APP
@pytest.mark.parametrize("route", [*ROUTES, "complete"])
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batch=INTEGERS)
def test_checkpoint_and_batch_ids_are_int64s(client: TestClient, route: str, batch: int) -> None:
    query = uuid.uuid4().hex
    if route == "complete":
        answer = client.post(f"/v1/queries/{query}/checkpoints/{batch}/complete")
        want = 404 if offset_ok(batch) else 422  # in range: an unknown query, nothing else
    else:
        answer = _post(client, route, query, {"orders": {"0": 1}}, batch=batch)
        want = 200 if offset_ok(batch) else 422
    assert answer.status_code == want, (batch, answer.text)
    if want == 422:
        assert answer.json()["outcome"] == "invalid"
