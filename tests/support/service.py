"""Helpers for tests of the HTTP service: events in Spark's own shape, waiting."""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

QUERY = "7d8c1a0e-1f7f-4a51-bb71-8f2c0b7d6b1e"


def spark_progress(
    batch: int,
    offsets: dict[str, dict[str, int]],
    query: str = QUERY,
    run: str = "run-1",
) -> dict[str, Any]:
    """A StreamingQueryProgress as ``progress.json`` prints it (one Kafka source per topic
    set, plus a non-Kafka source that must be ignored)."""
    return {
        "id": query,
        "runId": run,
        "name": "demo",
        "timestamp": "2026-11-21T12:00:00.000Z",
        "batchId": batch,
        "numInputRows": 10,
        "sources": [
            {"description": "FileStreamSource[/tmp/in]", "endOffset": {"logOffset": batch}},
            {
                "description": "KafkaV2[Subscribe[...]]",
                "startOffset": None,
                "endOffset": offsets,
                "latestOffset": offsets,
                "numInputRows": 10,
            },
        ],
        "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
    }


def progress_event(group: str, batch: int, topic: str) -> dict[str, Any]:
    """A ``POST /v1/progress`` body: batch ``batch`` of the query ``q-<group>`` of
    ``group``, at offset 10 x ``batch`` of ``topic``'s partition 0."""
    progress = spark_progress(batch, {topic: {"0": 10 * batch}}, query=f"q-{group}")
    return {"group_id": group, "progress": progress}


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``condition`` until truthy; retriable Kafka errors (a coordinator still loading,
    say) count as "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except Exception as exc:
            if not getattr(exc, "retriable", False):
                raise
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


async def until(condition: Callable[[], Any], what: str = "condition") -> None:
    """``wait_for`` on an event loop: poll ``condition`` until truthy, letting the loop run
    meanwhile. The minute bounds a failing wait; a passing one never nears it."""
    deadline = time.monotonic() + 60.0
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after 60 s waiting for {what}")
        await asyncio.sleep(0.01)


def settled_reads(
    readers: Mapping[str, Callable[[], T]], timeout: float = 20.0, what: str = "the reads"
) -> dict[str, T]:
    """Every reader's answer, all taken while nothing was published: the first reader
    answers alike before and after the others read (a status may change with the clock
    alone, OK becoming STOP; reads that straddle such a change are taken again). Timed
    out, the error shows what changed the last time.

    The answers are returned, not compared: the caller asserts they agree."""
    first = next(iter(readers))
    changed: list[str] = []

    def quiet() -> dict[str, T] | None:
        answers = {name: read() for name, read in readers.items()}  # the first one first
        again = readers[first]()
        if again == answers[first]:
            return answers
        before, after = (json.dumps(a, indent=1, sort_keys=True, default=str).splitlines()
                         for a in (answers[first], again))  # fmt: skip
        changed[:] = list(difflib.unified_diff(before, after, lineterm="", n=2))[2:40]
        return None

    try:
        answers: dict[str, T] = wait_for(quiet, timeout, f"{what} to settle")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; what changed last:\n" + "\n".join(changed)) from None
    return answers


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus text, or None if absent."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of every sample of ``name`` with these labels (say, over all groups)."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def counted_metrics(http: Any, query_id: str, group: str, timeout: float = 20.0) -> str:
    """``/metrics`` once no commit of the group is in flight and its counters there are
    the service's own, as ``/v1/queries/{query_id}`` shows them (its memory, which the
    watcher that exports every per-group series is told every second)."""

    def agreeing() -> str | None:
        view = http.get(f"/v1/queries/{query_id}").json()
        if view["in_flight"] is not None:
            return None
        own = view["counters"]
        text = http.get("/metrics").text
        at = {"consumergroup": group}
        exported = {
            "commits_succeeded": metric(text, "sidecar_commits_succeeded_total", **at),
            "commits_skipped": metric(text, "sidecar_commits_skipped_total", **at),
            "commits_failed": metric(text, "sidecar_commits_failed_total", **at),
            "events": {
                outcome: metric(text, "sidecar_events_total", outcome=outcome, **at)
                for outcome in own["events"]
            },
        }
        wanted = {
            "commits_succeeded": own["commits_succeeded"],
            "commits_skipped": own["commits_skipped"],
            "commits_failed": sum(own["commits_failed"].values()),
            "events": own["events"],
        }
        return text if exported == wanted else None

    return str(wait_for(agreeing, timeout, f"{group}'s counters on /metrics as the service's"))


# Every read of the service's state: after any input it accepted, each answers 200.
STATE_READS = ("/v1/queries", "/v1/status", "/v1/followed-folders", "/ui", "/metrics")


def assert_state_reads_answer(http: Any) -> None:
    """Each of ``STATE_READS`` answers 200 (``http``: an httpx client on the service)."""
    for read in STATE_READS:
        answer = http.get(read)
        assert answer.status_code == 200, f"{read}: {answer.status_code} {answer.text[:300]}"
