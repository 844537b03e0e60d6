"""One caller's bad request never fails another's: rounds of 30 concurrent well-formed
events (30 groups) with one odd request among them, against the real service on SQLite
and on PostgreSQL, with the real broker.

The odd request puts a value no store can hold (a lone surrogate, NUL, an over-long
name) into one string field of one write route. Every odd request is answered 4xx,
every neighbour 2xx, every neighbour's offsets reach Kafka, every read of state answers
200 afterwards, nothing odd is in the state, and every log line is still JSON.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from harness.service_process import ServiceProcess
from tests.support.kafka import unique_group, wait_for_committed
from tests.support.service import assert_state_reads_answer, spark_progress

pytestmark = pytest.mark.kafka

NEIGHBOURS = 30
# Values no store can hold: a lone surrogate is valid JSON text but not Unicode text;
# PostgreSQL's text cannot hold NUL; every name has a bound.
UNSTORABLE = {"surrogate": "evil-\ud800", "nul": "evil-\x00", "long": "e" * 5000}


# Reads with a name in the URL: an unstorable one is a 4xx, never a 5xx.
ODD_READS = [
    "/v1/queries/{v}",
    "/v1/status/{v}",
    "/v1/groups/{v}/starting-offsets",
    "/v1/groups/odd-group/starting-offsets?topic={v}",
]


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str, database_url: str) -> Iterator[ServiceProcess]:
    process = ServiceProcess(tmp_path, kafka_bootstrap, database_url=database_url)
    yield process.start()
    process.stop()


def _progress(query: str, batch: int, topic: str, **fields: Any) -> dict[str, Any]:
    progress = spark_progress(batch, {topic: {"0": batch}}, query=query)
    progress.update(fields)
    return progress


def _odd_requests(
    topic: str, folder: Path
) -> list[tuple[str, str, str, Callable[[str], dict[str, Any]]]]:
    """(case, method, url template, body of value) for each string field of each write
    route; ``{v}`` in the URL is the value, percent-encoded by httpx."""

    def progress_with(**fields: Any) -> Callable[[str], dict[str, Any]]:
        def body(value: str) -> dict[str, Any]:
            chosen = {k: (value if v is None else v(value)) for k, v in fields.items()}
            group = chosen.pop("group_id", "odd-group")
            return {"group_id": group, "progress": _progress("odd-query", 1, topic, **chosen)}

        return body

    def checkpoint_with(**fields: Any) -> Callable[[str], dict[str, Any]]:
        def body(value: str) -> dict[str, Any]:
            event: dict[str, Any] = {
                "checkpoint_id": 1,
                "group_id": "odd-group",
                "offsets": {topic: {"0": 1}},
                "run_id": "odd-run",
            }
            event.update({k: (value if v is None else v(value)) for k, v in fields.items()})
            return event

        return body

    no_body: Callable[[str], dict[str, Any]] = lambda _value: {}  # noqa: E731
    return [
        ("progress.group_id", "POST", "/v1/progress", progress_with(group_id=None)),
        ("progress.id", "POST", "/v1/progress", progress_with(id=None)),
        ("progress.runId", "POST", "/v1/progress", progress_with(runId=None)),
        (
            "progress.topic",
            "POST",
            "/v1/progress",
            progress_with(sources=lambda v: [{"endOffset": {v: {"0": 1}}}]),
        ),
        (
            "progress.partition",
            "POST",
            "/v1/progress",
            progress_with(sources=lambda v: [{"endOffset": {topic: {v: 1}}}]),
        ),
        (
            "progress.endOffset_as_text",  # the Python listener's form: JSON in a string
            "POST",
            "/v1/progress",
            progress_with(sources=lambda v: [{"endOffset": json.dumps({v: {"0": 1}})}]),
        ),
        ("checkpoint.query_id", "POST", "/v1/queries/{v}/checkpoints", checkpoint_with()),
        (
            "checkpoint.group_id",
            "POST",
            "/v1/queries/odd-q/checkpoints",
            checkpoint_with(group_id=None),
        ),
        (
            "checkpoint.run_id",
            "POST",
            "/v1/queries/odd-q/checkpoints",
            checkpoint_with(run_id=None),
        ),
        (
            "checkpoint.topic",
            "POST",
            "/v1/queries/odd-q/checkpoints",
            checkpoint_with(offsets=lambda v: {v: {"0": 1}}),
        ),
        (
            "checkpoint.partition",
            "POST",
            "/v1/queries/odd-q/checkpoints",
            checkpoint_with(offsets=lambda v: {topic: {v: 1}}),
        ),
        ("complete.query_id", "POST", "/v1/queries/{v}/checkpoints/1/complete", no_body),
        ("release.query_id", "DELETE", "/v1/queries/{v}", no_body),
        ("allow_rewind.group_id", "POST", "/v1/groups/{v}/allow-rewind", no_body),
        (
            "commit_interval.group_id",
            "PUT",
            "/v1/groups/{v}/commit-interval",
            lambda _v: {"seconds": 1},
        ),
        (
            "follow.path",
            "POST",
            "/v1/followed-folders",
            lambda v: {"path": f"{folder}/{v}", "group_id": "odd-group"},
        ),
        (
            "follow.group_id",
            "POST",
            "/v1/followed-folders",
            lambda v: {"path": str(folder), "group_id": v},
        ),
        ("unfollow.path", "DELETE", "/v1/followed-folders?path={v}", no_body),
    ]


async def _round(
    url: str, groups: list[str], batch: int, topic: str, odd: tuple[str, str, dict[str, Any]]
) -> tuple[list[httpx.Response], httpx.Response]:
    method, path, body = odd
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        neighbours = [
            client.post(
                "/v1/progress",
                json={"group_id": g, "progress": _progress(f"q-{g}", batch, topic)},
            )
            for g in groups
        ]
        half = len(neighbours) // 2
        # JSON text with escapes (``"\ud800"``): how a buggy or hostile client sends them
        content = json.dumps(body).encode() if body else None
        odd_call = client.request(
            method, path, content=content, headers={"content-type": "application/json"}
        )
        answers = await asyncio.gather(*neighbours[:half], odd_call, *neighbours[half:])
    return [*answers[:half], *answers[half + 1 :]], answers[half]


def test_an_unstorable_value_fails_only_its_own_request(
    service: ServiceProcess,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic = new_topic(1)
    groups = [unique_group("iso") for _ in range(NEIGHBOURS)]
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    batch = 0
    refused: list[str] = []
    for case, method, template, body_of in _odd_requests(topic, folder):
        for kind, value in UNSTORABLE.items():
            batch += 1
            # in a URL, the value's UTF-8 bytes (a surrogate's too), percent-encoded
            path = template.replace("{v}", quote(value, safe="", errors="surrogatepass"))
            neighbours, odd = asyncio.run(
                _round(service.url, groups, batch, topic, (method, path, body_of(value)))
            )
            where = f"{case} ({kind}), round {batch}"
            assert 400 <= odd.status_code < 500, f"{where}: {odd.status_code} {odd.text[:300]}"
            assert odd.json()["outcome"], where  # a refusal's body is JSON, with its word
            failed = [(a.status_code, a.text[:200]) for a in neighbours if a.status_code != 200]
            assert not failed, f"{where}: {len(failed)} neighbours failed: {failed[:3]}"
            assert {a.json()["outcome"] for a in neighbours} == {"accepted"}, where
            refused.append(f"{case} ({kind}): {odd.status_code}")

    wait_for_committed(kafka_bootstrap, groups, {(topic, 0): batch})
    for template in ODD_READS:
        for kind, value in UNSTORABLE.items():
            path = template.replace("{v}", quote(value, safe="", errors="surrogatepass"))
            answer = service.http.get(path)
            assert 400 <= answer.status_code < 500, f"GET {template} ({kind}): {answer.text[:300]}"
    assert_state_reads_answer(service.http)
    queries = service.http.get("/v1/queries").json()
    assert {q["query_id"] for q in queries} == {f"q-{g}" for g in groups}, "nothing odd stored"
    assert {q["last_completed_checkpoint"] for q in queries} == {batch}
    assert service.http.get("/v1/followed-folders").json() == []
    for line in service.log.read_text(encoding="utf-8", errors="strict").splitlines():
        json.loads(line)  # every log line is still one JSON object
    assert len(refused) == 3 * len(_odd_requests(topic, folder))
