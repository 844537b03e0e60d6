"""The JSON of the parts of a group's report on the status board
(``adapters.sql.status_board``, whose layout version they are part of). Each ``decode_*``
reads what its ``encode_*`` wrote."""

from __future__ import annotations

from collections import Counter
from typing import Any

from spark_offset_sidecar.core.lag.figures import JobRates
from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.core.ledger.state import GroupCounters


def encode_counters(counters: GroupCounters) -> dict[str, Any]:
    return {
        "succeeded": counters.succeeded,
        "skipped": counters.skipped,
        "failed": dict(counters.failed),
        "events": dict(counters.events),
        "pending_dropped": counters.pending_dropped,
        "held_back": counters.held_back,
        "refreshed": counters.refreshed,
    }


def decode_counters(doc: dict[str, Any]) -> GroupCounters:
    return GroupCounters(
        succeeded=doc["succeeded"],
        skipped=doc["skipped"],
        failed=Counter(doc["failed"]),
        events=Counter(doc["events"]),
        pending_dropped=doc["pending_dropped"],
        held_back=doc["held_back"],
        refreshed=doc["refreshed"],
    )


def encode_folder(f: FolderReport) -> list[Any]:
    return [
        f.path,
        f.query_id,
        f.newest_batch_in_folder,
        f.last_batch_recorded,
        f.pending_batch,
        f.behind_seconds,
        [list(e) for e in f.errors],
        f.last_error,
        f.last_poll_at,
    ]


def decode_folder(doc: list[Any]) -> FolderReport:
    path, query, newest, recorded, pending, behind, errors, error, at = doc
    return FolderReport(
        path,
        query,
        newest,
        recorded,
        pending,
        behind,
        tuple((reason, count) for reason, count in errors),
        error,
        at,
    )


def encode_job(job: JobRates | None) -> list[Any] | None:
    if job is None:
        return None
    return [job.at, job.input_rows_per_second, job.processed_rows_per_second, job.batch_duration_ms]


def decode_job(doc: list[Any] | None) -> JobRates | None:
    return JobRates(*doc) if doc is not None else None
