"""The ``StatusBoard`` port on PostgreSQL: the ``group_reports`` table, one row per group
holding its owner's last published report and status window as JSON. ``publish`` writes
a row only where this replica owns the group (one statement: a replica that lost the
group writes nothing); reads take no lock.

Versions: replicas of two releases share the board during a rolling upgrade, so each
report says its layout's ``version``. A reader takes every version up to its own (a field
an older one lacks reads as its default) and leaves out a newer one rather than misread
it. A field renamed, removed, given another meaning, or added takes a new version.
"""

from __future__ import annotations

import json
import logging
from array import array
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, select, text
from sqlalchemy.exc import SQLAlchemyError

from spark_offset_sidecar.adapters.sql.schema import group_reports
from spark_offset_sidecar.core.lag.figures import (
    CatchUp,
    CatchUpState,
    DataStatus,
    GroupLag,
    JobRates,
    PartitionLag,
)
from spark_offset_sidecar.core.lag.report import (
    CommitUnderway,
    FolderReport,
    GroupReport,
    LiveCommits,
)
from spark_offset_sidecar.core.lag.status import (
    GroupSample,
    GroupStatus,
    PartitionStatus,
    Status,
    StoredWindow,
)
from spark_offset_sidecar.core.ledger.state import GroupCounters
from spark_offset_sidecar.core.offsets import TopicPartition, from_json, to_json
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.ports.status_board import BoardEntry

reports_c = group_reports.c
log = logging.getLogger(__name__)

# The layout ``encode_report`` writes. 1: no ``version`` (``waiting``, ``lag`` and
# ``cluster`` may be absent); 2: ``version`` written, every field present.
REPORT_VERSION = 2

# A chunk of entries in one statement, as one JSON text (docs/decisions.md, "Reports
# published as one JSON text"); RETURNING counts the rows written. Reports and windows are
# JSON strings in it, not nested documents: PostgreSQL scans them instead of parsing them
# (0.6x of its CPU a publish), and a figure Python writes as NaN, not JSON, fails nothing.
_PUBLISH = text(
    """
    INSERT INTO group_reports
        (group_id, reported_by, evaluated_at, status, report, status_window)
    SELECT g.group_id, :replica, r.evaluated_at, r.status, r.report, r.status_window
    FROM json_to_recordset(CAST(:entries AS json)) AS r(
        group_id text, evaluated_at double precision, status text,
        report text, status_window text
    )
    JOIN consumer_groups g ON g.group_id = r.group_id
    WHERE g.owner_id = :owner
    ON CONFLICT (group_id) DO UPDATE SET
        reported_by = excluded.reported_by,
        evaluated_at = excluded.evaluated_at,
        status = excluded.status,
        report = excluded.report,
        status_window = excluded.status_window
    RETURNING group_reports.group_id
    """
)
PUBLISH_CHUNK = 1000  # entries a statement: at 32 partitions a group, about 2 MB of JSON


def _entries_document(chunk: Sequence[BoardEntry]) -> str:
    """The JSON array ``_PUBLISH`` reads, an object an entry; its report and window are
    the strings ``encode_report`` and ``encode_window`` wrote, stored as they are."""
    return json.dumps(
        [
            {
                "group_id": e.report.status.group_id,
                "evaluated_at": e.report.evaluated_at,
                "status": e.report.status.status.value,
                "report": encode_report(e.report),
                "status_window": encode_window(e.window),
            }
            for e in chunk
        ]
    )


class SqlStatusBoard:
    def __init__(self, engine: Engine, replica_id: str) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("the status board of replicas needs PostgreSQL")
        self.engine = engine
        self.replica_id = replica_id
        self._newer_seen: set[int] = set()  # newer report versions met (said once each)

    def publish(self, entries: Sequence[BoardEntry]) -> int:
        # The last entry of a group wins (one statement may not update a row twice).
        latest = {e.report.status.group_id: e for e in entries}
        if not latest:
            return 0
        ordered = list(latest.values())
        with self._errors("publishing group reports"), self.engine.begin() as conn:
            written = 0
            for at in range(0, len(ordered), PUBLISH_CHUNK):
                document = _entries_document(ordered[at : at + PUBLISH_CHUNK])
                # Two names for one value: PostgreSQL deduces one type a parameter, and
                # its two uses differ (varchar, text).
                params = {"replica": self.replica_id, "owner": self.replica_id, "entries": document}
                written += len(conn.execute(_PUBLISH, params).all())
        return written

    def read(self, group_ids: Collection[str] | None = None) -> list[GroupReport]:
        query = select(
            reports_c.group_id, reports_c.reported_by, reports_c.evaluated_at, reports_c.report
        ).order_by(reports_c.group_id)
        if group_ids is not None:
            query = query.where(reports_c.group_id.in_(sorted(group_ids)))
        with self._errors("reading group reports"), self.engine.connect() as conn:
            rows = conn.execute(query).all()
        reports = []
        for r in rows:
            try:
                reports.append(decode_report(r.group_id, r.reported_by, r.evaluated_at, r.report))
            except NewerReport as exc:
                if exc.version not in self._newer_seen:
                    self._newer_seen.add(exc.version)
                    log.warning(
                        "group reports of version %d (this replica reads up to %d) are left "
                        "out until this replica is upgraded: their groups read as not "
                        "reported here",
                        exc.version,
                        REPORT_VERSION,
                    )
        return reports

    def windows(self, group_ids: Collection[str]) -> dict[str, StoredWindow]:
        if not group_ids:
            return {}
        query = select(reports_c.group_id, reports_c.status_window).where(
            reports_c.group_id.in_(sorted(group_ids))
        )
        with self._errors("reading status windows"), self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {r.group_id: decode_window(r.status_window) for r in rows}

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"{doing}: {type(exc).__name__}: {exc}") from exc


# The JSON forms. Partitions are [topic, partition, status, offset, log end, lag, samples]
# rows and window samples [at, [[topic, partition], ...], offsets, lags]: a group of 32
# partitions with a full window of 10 takes a few KB. A folder and a job's rates are the
# list of their fields' values, the counters the object of theirs, in the dataclasses'
# order: a field of theirs changed changes the layout (tests/adapters/test_status_board.py
# holds their fields to ``REPORT_VERSION``).


def encode_report(report: GroupReport) -> str:
    status, live = report.status, report.live
    flight = live.in_flight
    return json.dumps(
        {
            "version": REPORT_VERSION,
            "query_id": status.query_id,
            "status": status.status.value,
            "complete": status.complete,
            "total_lag": status.total_lag,
            "consecutive_failures": status.consecutive_failures,
            "last_commit_at": status.last_commit_at,
            "partitions": [[*p[:2], p.status.value, *p[3:]] for p in status.partitions],
            "pending": report.pending,
            "log_ends_read_at": report.log_ends_read_at,
            "in_flight": [flight.checkpoint_id, to_json(flight.offsets), flight.attempt]
            if flight is not None
            else None,
            "retry_at": live.retry_at,
            "last_failure": live.last_failure,
            "waiting": live.waiting,
            "cluster": report.cluster,
            "folders": [[*vars(f).values()] for f in report.folders],
            "lag": _encode_lag(report.lag),
            "counters": vars(live.counters),
        },
        separators=(",", ":"),
        sort_keys=True,
    )


class NewerReport(ValueError):
    """A report of a layout newer than this release reads."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"a group report of version {version}; this release reads up to {REPORT_VERSION}"
        )
        self.version = version


def decode_report(group_id: str, reported_by: str, evaluated_at: float, text: str) -> GroupReport:
    """A report as ``encode_report`` of this release or an older one wrote it; raises
    ``NewerReport`` for a newer layout."""
    doc: dict[str, Any] = json.loads(text)
    version = doc.get("version", 1)
    if version > REPORT_VERSION:
        raise NewerReport(version)
    status = GroupStatus(
        group_id=group_id,
        query_id=doc["query_id"],
        status=Status(doc["status"]),
        complete=doc["complete"],
        total_lag=doc["total_lag"],
        consecutive_failures=doc["consecutive_failures"],
        last_commit_at=doc["last_commit_at"],
        partitions=tuple(
            PartitionStatus(topic, partition, Status(state), offset, log_end, lag, samples)
            for topic, partition, state, offset, log_end, lag, samples in doc["partitions"]
        ),
    )
    flight, counters = doc["in_flight"], doc["counters"]
    live = LiveCommits(
        in_flight=CommitUnderway(flight[0], from_json(flight[1]), flight[2])
        if flight is not None
        else None,
        retry_at=doc["retry_at"],
        last_failure=doc["last_failure"],
        waiting=doc.get("waiting"),  # absent from some version-1 reports
        counters=GroupCounters(
            **counters | {k: Counter(counters[k]) for k in ("failed", "events")}
        ),
    )
    for f in doc["folders"]:
        f[6] = tuple(map(tuple, f[6]))  # its errors: (reason, count) pairs
    return GroupReport(
        status,
        live,
        doc["pending"],
        evaluated_at,
        doc["log_ends_read_at"],
        reported_by,
        tuple(FolderReport(*f) for f in doc["folders"]),
        _decode_lag(doc.get("lag")),  # absent from some version-1 reports
        doc.get("cluster"),  # likewise
    )


def _encode_lag(lag: GroupLag | None) -> dict[str, Any] | None:
    if lag is None:
        return None
    c, job = lag.catch_up, lag.catch_up.job
    return {
        "partitions": [list(p) for p in lag.partitions],
        "data_status": lag.data_status.value,
        "lost_total": lag.lost_total,
        "catch_up": [c.state.value, c.eta_seconds, c.consume_rate, c.produce_rate],
        "job": None if job is None else [*vars(job).values()],
        "trend": [list(point) for point in lag.trend],
    }


def _decode_lag(doc: dict[str, Any] | None) -> GroupLag | None:
    if doc is None:
        return None
    state, eta, consume, produce = doc["catch_up"]
    job = None if doc["job"] is None else JobRates(*doc["job"])
    return GroupLag(
        partitions=tuple(PartitionLag(*p) for p in doc["partitions"]),
        data_status=DataStatus(doc["data_status"]),
        lost_total=doc["lost_total"],
        catch_up=CatchUp(CatchUpState(state), eta, consume, produce, job),
        trend=tuple((at, lag) for at, lag in doc["trend"]),
    )


def encode_window(window: StoredWindow) -> str:
    return json.dumps(
        {
            "lagging_since": window.lagging_since,
            "samples": [
                [s.at, [list(tp) for tp in s.partitions], list(s.offsets), list(s.lags)]
                for s in window.samples
            ],
        },
        separators=(",", ":"),
    )


def decode_window(text: str) -> StoredWindow:
    doc: dict[str, Any] = json.loads(text)
    samples: list[GroupSample] = []
    for at, partitions, offsets, lags in doc["samples"]:
        tps = tuple(TopicPartition(topic, partition) for topic, partition in partitions)
        if samples and samples[-1].partitions == tps:
            tps = samples[-1].partitions  # shared, as CommitWindows keeps them
        samples.append(GroupSample(at, tps, array("q", offsets), array("q", lags)))
    return StoredWindow(tuple(samples), doc["lagging_since"])
