"""Property-based fuzz of the HTTP API from its own OpenAPI document (schemathesis), on a
real service process: never a 5xx, and a refused request changes no state.

The first tests have Kafka unreachable on purpose: they are about the HTTP surface, and
commits that cannot land keep the commit loop busy in the background, as in production
trouble. The last one fuzzes beside well-formed neighbours, with the real broker, on
SQLite and on PostgreSQL: every neighbour is accepted and committed.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from harness.machine import free_port
from harness.service_process import ServiceProcess
from tests.support.fuzz import (
    FUZZ_EXAMPLES,
    FUZZ_SEED,
    HOSTILE_TEXT,
    KAFKA_OFFSETS,
    NAMES,
    examples,
)
from tests.support.kafka import unique_group, wait_for_committed
from tests.support.service import assert_state_reads_answer, spark_progress

pytestmark = pytest.mark.faults
# The tests on the module's service (started once) run on one worker.
ON_FUZZED_SERVICE = pytest.mark.xdist_group("fuzzed-service")


@pytest.fixture(scope="module")
def fuzzed_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    service = ServiceProcess(
        tmp_path_factory.mktemp("fuzz"),
        f"127.0.0.1:{free_port()}",
        commit_timeout_seconds=1,
        max_body_bytes=65536,
    )
    yield service.start()
    service.stop()


@pytest.fixture(scope="module")
def api_schema(fuzzed_service: ServiceProcess) -> Any:
    return schemathesis.openapi.from_url(f"{fuzzed_service.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


def _event_state(service: ServiceProcess) -> list[tuple[Any, ...]]:
    """What only events change (the commit loop moves slots in the background)."""
    return sorted(
        (q["query_id"], q["group_id"], q["last_completed_checkpoint"], q["pending_checkpoints"])
        for q in service.http.get("/v1/queries").json()
    )


def _outcome(response: Any) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("outcome") if isinstance(body, dict) else None


@ON_FUZZED_SERVICE
@schema.parametrize()
@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
def test_no_5xx_and_refused_requests_change_nothing(
    case: Any, fuzzed_service: ServiceProcess
) -> None:
    before = _event_state(fuzzed_service)
    response = case.call(base_url=fuzzed_service.url)
    if response.status_code == 503 and case.path.endswith("/starting-offsets"):
        # Kafka is down in this test: the documented answer names it.
        assert "from Kafka failed" in response.json()["detail"]
    else:
        assert response.status_code < 500, f"{case.method} {case.path}: {response.text[:500]}"
    if case.method == "GET" or response.status_code >= 300 or _outcome(response) != "accepted":
        assert _event_state(fuzzed_service) == before, "a read or refused request changed state"
    assert fuzzed_service.process is not None
    assert fuzzed_service.process.poll() is None, "the service is still running"


@ON_FUZZED_SERVICE
@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe not utf-8",
        b'{"group_id": "g", "progress": {"id": "q", "batchId": 1e400}}',
        b'{"group_id": "g", "progress": {"id": "q", "batchId": 9223372036854775808}}',
        b'{"group_id": "g", "progress": {"id": "q", "batchId": 1, "sources": '
        b'[{"endOffset": {"t": {"0": 99999999999999999999999}}}]}}',
        b'{"group_id": "g\\u0000", "progress": {"id": "q", "batchId": 1}}',
        b'{"group_id": "g", "progress": null}',
        b"null",
        b'"a string"',
    ],
)
def test_hand_written_hostile_bodies_are_4xx(fuzzed_service: ServiceProcess, body: bytes) -> None:
    before = _event_state(fuzzed_service)
    answer = fuzzed_service.http.post(
        "/v1/progress", content=body, headers={"content-type": "application/json"}
    )
    assert 400 <= answer.status_code < 500, answer.text
    assert _event_state(fuzzed_service) == before


@ON_FUZZED_SERVICE
def test_duplicate_keys_take_the_last_and_change_nothing_here(
    fuzzed_service: ServiceProcess,
) -> None:
    before = _event_state(fuzzed_service)
    body = (
        b'{"group_id": "g", "progress": {"id": "dup", "batchId": 1, "sources": '
        b'[{"endOffset": {"t": {"0": 5}}}], "sources": []}}'
    )
    answer = fuzzed_service.http.post(
        "/v1/progress", content=body, headers={"content-type": "application/json"}
    )
    assert (answer.status_code, answer.json()["outcome"]) == (200, "ignored")
    assert _event_state(fuzzed_service) == before


@ON_FUZZED_SERVICE
def test_progress_from_older_spark_and_non_kafka_sources(fuzzed_service: ServiceProcess) -> None:
    spark_3_style = {  # Spark 3.x: no "name", offsets in numbers, extra metrics as strings
        "id": "b1e6c1e8-0c1f-4a3e-9a55-1a2b3c4d5e6f",
        "runId": "0f0e0d0c-0b0a-0908-0706-050403020100",
        "timestamp": "2023-01-01T00:00:00.000Z",
        "batchId": 3,
        "numInputRows": 0,
        "durationMs": {"triggerExecution": 3},
        "sources": [
            {
                "description": "KafkaV2[Subscribe[legacy]]",
                "startOffset": {"legacy": {"0": 1}},
                "endOffset": {"legacy": {"0": 2}},
                "metrics": {"avgOffsetsBehindLatest": "0.0"},
            }
        ],
        "sink": {"description": "MemorySink"},
    }
    answer = fuzzed_service.http.post(
        "/v1/progress", json={"group_id": "legacy-group", "progress": spark_3_style}
    )
    assert answer.json()["outcome"] == "accepted"
    only_files = {"id": "files-only", "batchId": 0, "sources": [{"endOffset": {"logOffset": 0}}]}
    ignored = fuzzed_service.http.post(
        "/v1/progress", json={"group_id": "files", "progress": only_files}
    )
    assert (ignored.status_code, ignored.json()["outcome"]) == (200, "ignored")


# Fuzzing beside well-formed traffic: the fuzzer's requests (valid by the schema, invalid
# by it, and valid ones with hostile text put into one of their body's strings) go to the
# real service on SQLite and on PostgreSQL, with the real broker, while neighbours post
# well-formed events of their own groups. Seeded and bounded here; ``make fuzz`` runs it
# longer (FUZZ_EXAMPLES, FUZZ_SEED).
NEIGHBOUR_GROUPS = 8
JSON_CONTENT = {"content-type": "application/json"}


class Neighbours(threading.Thread):
    """Well-formed progress events of their own groups, posted one after another until
    stopped (at most ``limit`` rounds); every answer is kept."""

    def __init__(self, url: str, topic: str, limit: int = 10_000) -> None:
        super().__init__(daemon=True)
        self.url, self.topic, self.limit = url, topic, limit
        self.groups = [unique_group("fuzz-neighbour") for _ in range(NEIGHBOUR_GROUPS)]
        self.answers: list[tuple[str, int, int, str | None]] = []
        self.stopping = threading.Event()
        self.last_batch = 0

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            for batch in range(1, self.limit + 1):
                if self.stopping.is_set():
                    return
                for group in self.groups:
                    offsets = {self.topic: {"0": batch}}
                    answer = client.post(
                        "/v1/progress",
                        json={
                            "group_id": group,
                            "progress": spark_progress(batch, offsets, query=f"q-{group}"),
                        },
                    )
                    self.answers.append((group, batch, answer.status_code, _outcome(answer)))
                self.last_batch = batch


@st.composite
def spark_events(draw: st.DrawFn) -> tuple[str, str, Any]:
    """(method, path, body) of a Spark-shaped event whose names may be hostile: the
    grammar the schema does not know (a progress's sources, a checkpoint's offsets)."""
    offsets = draw(KAFKA_OFFSETS)
    query, group, run = draw(NAMES), draw(NAMES), draw(NAMES)
    if draw(st.booleans()):
        end = json.dumps(offsets) if draw(st.booleans()) else offsets  # listener's form
        progress = {"id": query, "runId": run, "batchId": draw(st.integers(0, 9)),
                    "sources": [{"endOffset": end}]}  # fmt: skip
        return "POST", "/v1/progress", {"group_id": group, "progress": progress}
    body = {"checkpoint_id": draw(st.integers(0, 9)), "group_id": group, "offsets": offsets,
            "run_id": run}  # fmt: skip
    return "POST", f"/v1/queries/{quote(query, safe='', errors='surrogatepass')}/checkpoints", body


def _hostile(case: Any, data: st.DataObject) -> str | None:
    """Put hostile text into one string of ``case``'s JSON body (a value or a key);
    returns where, or None if the body has no string."""
    places: list[tuple[Any, Any, bool]] = []  # (container, key, is_key)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                places.append((node, key, True))
                if isinstance(value, str):
                    places.append((node, key, False))
                walk(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, str):
                    places.append((node, index, False))
                walk(value)

    walk(case.body)
    if not places:
        return None
    container, key, is_key = data.draw(st.sampled_from(places), label="place")
    text = data.draw(HOSTILE_TEXT, label="hostile text")
    if is_key:
        container[text] = container.pop(key)
    else:
        container[key] = text
    return f"{'key' if is_key else 'value'} {key!r}"


@pytest.fixture
def fuzz_target(tmp_path: Any, kafka_bootstrap: str, database_url: str) -> Iterator[ServiceProcess]:
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, database_url=database_url, max_body_bytes=65536
    )
    yield service.start()
    service.stop()


def _not_neighbours(service: ServiceProcess, neighbours: Neighbours) -> list[tuple[Any, ...]]:
    mine = {f"q-{g}" for g in neighbours.groups}
    return [state for state in _event_state(service) if state[0] not in mine]


def test_fuzzing_beside_well_formed_traffic(
    fuzz_target: ServiceProcess,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
) -> None:
    service = fuzz_target
    api = schemathesis.openapi.from_url(f"{service.url}/openapi.json")
    cases = st.one_of(
        api.as_strategy(GenerationMode.POSITIVE), api.as_strategy(GenerationMode.NEGATIVE)
    )
    neighbours = Neighbours(service.url, new_topic(1))
    statuses: Counter[int] = Counter()
    started = time.monotonic()

    @seed(FUZZ_SEED)
    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(cases, spark_events()), data=st.data())
    def fuzz(case: Any, data: st.DataObject) -> None:
        before = _not_neighbours(service, neighbours)
        if isinstance(case, tuple):  # a Spark-shaped event, sent as JSON text with escapes
            method, path, body = case
            response = service.http.request(
                method, path, content=json.dumps(body), headers=JSON_CONTENT
            )
            where = f"{method} {path}: {json.dumps(body)[:300]}"
        else:
            hostile = _hostile(case, data) if data.draw(st.booleans(), label="hostile") else None
            response = case.call(base_url=service.url)
            method, where = case.method, f"{case.method} {case.path} (hostile {hostile})"
        statuses[response.status_code] += 1
        assert response.status_code < 500, f"{where}: {response.text[:500]}"
        if method == "GET" or response.status_code >= 300 or _outcome(response) != "accepted":
            assert _not_neighbours(service, neighbours) == before, f"{where} changed state"
        assert service.process is not None
        assert service.process.poll() is None, "the service is still running"

    neighbours.start()
    try:
        fuzz()
    finally:
        neighbours.stopping.set()
        neighbours.join(60)
    elapsed = time.monotonic() - started

    failed = [a for a in neighbours.answers if (a[2], a[3]) != (200, "accepted")]
    assert not failed, f"{len(failed)} of {len(neighbours.answers)} neighbours failed: {failed[:5]}"
    assert neighbours.last_batch >= 1
    want = {(neighbours.topic, 0): neighbours.last_batch}
    wait_for_committed(kafka_bootstrap, neighbours.groups, want)
    assert_state_reads_answer(service.http)
    print(  # the figures ``make fuzz`` records
        f"\nfuzz: {sum(statuses.values())} requests in {elapsed:.1f} s, statuses "
        f"{dict(sorted(statuses.items()))}; neighbours {len(neighbours.answers)} events, "
        f"{neighbours.last_batch} batches each, all accepted and committed"
    )
