"""The status board on a real PostgreSQL (adapters.sql.status_board): reports and windows
come back as they were published, only a group's owner writes its row, and the stored
query ids list what every replica registered."""

from __future__ import annotations

import json
from array import array
from collections import Counter
from dataclasses import fields
from typing import Any

import pytest
from sqlalchemy import text

from spark_offset_sidecar.adapters.sql.lease_store import LeaseStore
from spark_offset_sidecar.adapters.sql.status_board import (
    REPORT_VERSION,
    NewerReport,
    SqlStatusBoard,
    decode_report,
    encode_report,
)
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
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.ports.status_board import BoardEntry
from tests.support.lease_clock import LeaseClock

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


LAG = GroupLag(
    partitions=(
        PartitionLag("orders", 0, 40, 5, 50, 10, 12.5, 0, 35, 70.0),
        PartitionLag("orders", 1, 2, 9, None, None, None, 7, None, None),
    ),
    data_status=DataStatus.LOST,
    lost_total=7,
    catch_up=CatchUp(CatchUpState.CATCHING_UP, 30.5, 12.0, 3.5, JobRates(99.5, 3.5, 120.0, 800)),
    trend=((60.0, 10), (120.0, 7)),
)


def entry(
    group_id: str, replica: str, at: float = 100.0, lag: GroupLag | None = None
) -> BoardEntry:
    status = GroupStatus(
        group_id=group_id,
        query_id=f"q{group_id[1:]}",
        status=Status.STALL,
        complete=0.5,
        total_lag=None,
        consecutive_failures=2,
        last_commit_at=at - 5,
        partitions=(
            PartitionStatus("orders", 0, Status.OK, 40, 50, 10, 3),
            PartitionStatus("orders", 1, Status.STALL, 2**62, None, None, 1),
        ),
    )
    live = LiveCommits(
        in_flight=CommitUnderway(7, {TP0: 40, TP1: 2**62}, 2),
        retry_at=at + 3,
        last_failure="broker unavailable",
        waiting="its coordinator, broker 2, cannot be reached for 4 s",
        counters=GroupCounters(
            succeeded=5,
            skipped=1,
            failed=Counter({"timeout": 2}),
            events=Counter({"accepted": 9}),
            pending_dropped=3,
            held_back=1,
            refreshed=4,
        ),
    )
    partitions = (TP0, TP1)
    window = StoredWindow(
        (
            GroupSample(at - 20, partitions, array("q", [10, 2**62]), array("q", [40, 0])),
            GroupSample(at - 10, partitions, array("q", [40, 2**62]), array("q", [10, 0])),
            GroupSample(at - 5, (TP0,), array("q", [40]), array("q", [10])),
        ),
        lagging_since=at - 30,
    )
    folders = (
        FolderReport("s3://ckpt/a", "q-a", 9, 8, 9, 1.5, (("unreachable", 2),), "timed out", at),
        FolderReport("/ckpt/b", None, None, None, None, 0.0, (), None, None),
    )
    return BoardEntry(GroupReport(status, live, 4, at, at - 1, replica, folders, lag), window)


def test_what_an_owner_publishes_every_replica_reads_back_as_it_was(stores: Any) -> None:
    a, b = stores
    LeaseStore(a.engine, "a", 30).renew()
    assert set(LeaseStore(a.engine, "a", 30).claim(2)) == {"g0", "g1"}
    board_a, board_b = SqlStatusBoard(a.engine, "a"), SqlStatusBoard(b.engine, "b")
    published = [entry("g0", "a"), entry("g1", "a", lag=LAG)]
    assert board_a.publish(published) == 2
    assert board_b.read() == [e.report for e in published]
    assert board_b.read(["g1", "g2"]) == [published[1].report]
    windows = board_b.windows(["g0", "g2"])
    assert windows == {"g0": published[0].window}
    samples = windows["g0"].samples
    assert samples[0].partitions is samples[1].partitions  # shared, as the windows keep them
    # A newer report replaces the older one.
    newer = entry("g0", "a", at=200.0)
    assert board_a.publish([newer]) == 1
    assert board_b.read(["g0"]) == [newer.report]


def test_a_report_published_before_commit_waiting_existed_reads_as_not_waiting() -> None:
    """During a rolling upgrade, older replicas publish reports without ``waiting``."""
    report = entry("g0", "a").report
    doc = json.loads(encode_report(report))
    del doc["waiting"]
    read = decode_report("g0", "a", report.evaluated_at, json.dumps(doc))
    assert read.live.waiting is None
    assert read.live.last_failure == report.live.last_failure


def test_a_version_1_report_reads_with_the_defaults_of_what_it_lacks() -> None:
    """Version 1 wrote no ``version``, and its oldest rows no ``waiting``, ``lag`` or
    ``cluster``: each reads as its default, the rest as written."""
    report = entry("g0", "a", lag=LAG).report
    doc = json.loads(encode_report(report))
    assert doc["version"] == REPORT_VERSION
    for newer in ("version", "waiting", "lag", "cluster"):
        del doc[newer]
    read = decode_report("g0", "a", report.evaluated_at, json.dumps(doc))
    assert (read.live.waiting, read.lag, read.cluster) == (None, None, None)
    assert read.status == report.status
    assert read.live.counters == report.live.counters
    assert read.folders == report.folders


def test_the_parts_written_by_their_fields_have_the_fields_of_this_version() -> None:
    """A folder, a job's rates and the counters are written as their dataclasses' fields:
    a field added, removed or moved changes the layout, and takes a new REPORT_VERSION
    (then this test, and the reading of the older version, change with it)."""
    assert REPORT_VERSION == 2
    names = {kind: [f.name for f in fields(kind)] for kind in (FolderReport, JobRates)}
    assert names[FolderReport] == [
        "path",
        "query_id",
        "newest_batch_in_folder",
        "last_batch_recorded",
        "pending_batch",
        "behind_seconds",
        "errors",
        "last_error",
        "last_poll_at",
    ]
    assert names[JobRates] == [
        "at",
        "input_rows_per_second",
        "processed_rows_per_second",
        "batch_duration_ms",
    ]
    assert [f.name for f in fields(GroupCounters)] == [
        "succeeded",
        "skipped",
        "failed",
        "events",
        "pending_dropped",
        "held_back",
        "refreshed",
    ]
    doc = json.loads(encode_report(entry("g0", "a", lag=LAG).report))
    assert doc["folders"][0] == [
        "s3://ckpt/a",
        "q-a",
        9,
        8,
        9,
        1.5,
        [["unreachable", 2]],
        "timed out",
        100.0,
    ]
    assert doc["lag"]["job"] == [99.5, 3.5, 120.0, 800]
    assert doc["counters"] == {
        "succeeded": 5,
        "skipped": 1,
        "failed": {"timeout": 2},
        "events": {"accepted": 9},
        "pending_dropped": 3,
        "held_back": 1,
        "refreshed": 4,
    }


def test_a_report_of_a_newer_version_is_left_out_and_said_once(
    stores: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A newer replica's layout is not misread: its group reads as not reported here,
    every other group is read, and the warning names the versions once."""
    a, b = stores
    LeaseStore(a.engine, "a", 30).renew()
    LeaseStore(a.engine, "a", 30).claim(2)
    board_a, board_b = SqlStatusBoard(a.engine, "a"), SqlStatusBoard(b.engine, "b")
    published = [entry("g0", "a"), entry("g1", "a")]
    assert board_a.publish(published) == 2
    newer = json.loads(encode_report(published[1].report))
    newer["version"] = REPORT_VERSION + 1
    with a.engine.begin() as conn:
        conn.execute(
            text("UPDATE group_reports SET report = :r WHERE group_id = 'g1'"),
            {"r": json.dumps(newer)},
        )
    with pytest.raises(NewerReport, match=f"version {REPORT_VERSION + 1}"):
        decode_report("g1", "a", 0.0, json.dumps(newer))
    with caplog.at_level("WARNING"):
        assert board_b.read() == [published[0].report]
        assert board_b.read(["g1"]) == []
    said = [r.getMessage() for r in caplog.records if "group reports of version" in r.getMessage()]
    assert len(said) == 1, said
    assert f"version {REPORT_VERSION + 1} (this replica reads up to {REPORT_VERSION})" in said[0]


def test_only_the_owner_writes_a_groups_report(stores: Any, lease_clock: LeaseClock) -> None:
    a, b = stores
    leases_a = LeaseStore(a.engine, "a", 10, now=lease_clock.sql)
    leases_a.renew()
    leases_a.claim(4)
    board_a, board_b = SqlStatusBoard(a.engine, "a"), SqlStatusBoard(b.engine, "b")
    assert board_b.publish([entry("g0", "b")]) == 0  # b does not own g0
    assert board_a.publish([entry("g0", "a"), entry("g9", "a")]) == 1  # g9 is no group
    # a's lease runs out and b takes the groups: a's late reports are not written.
    lease_clock.advance(10.1)
    leases_b = LeaseStore(b.engine, "b", 30, now=lease_clock.sql)
    leases_b.renew()
    assert set(leases_b.claim(4)) == {"g0", "g1", "g2", "g3"}
    assert board_a.publish([entry("g0", "a", at=300.0)]) == 0
    assert board_b.publish([entry("g0", "b", at=301.0)]) == 1
    (report,) = board_a.read(["g0"])
    assert (report.reported_by, report.evaluated_at) == ("b", 301.0)


def test_the_snapshot_has_every_replicas_queries_and_a_lost_database_is_unavailable(
    stores: Any, postgres_server: Any
) -> None:
    a, _ = stores
    stored = a.snapshot()  # registered through b
    assert sorted(q.query_id for q in stored.queries) == ["q0", "q1", "q2", "q3"]
    assert sorted(g.group_id for g in stored.groups) == ["g0", "g1", "g2", "g3"]
    board = SqlStatusBoard(a.engine, "a")
    postgres_server.halt()
    try:
        with pytest.raises(StoreUnavailable, match="reading group reports"):
            board.read()
        with pytest.raises(StoreUnavailable, match="publishing group reports"):
            board.publish([entry("g0", "a")])
    finally:
        postgres_server.start()


def test_a_fleets_reports_are_published_in_chunks_and_a_group_once(stores: Any) -> None:
    """More entries than one statement takes (PUBLISH_CHUNK) are all written, in one
    transaction; a group given twice is written once, as its last entry."""
    from spark_offset_sidecar.adapters.sql.status_board import PUBLISH_CHUNK
    from spark_offset_sidecar.core.ledger.changes import QueryRegistered

    a, _ = stores
    groups = 2 * PUBLISH_CHUNK + 500
    a.persist([QueryRegistered(f"q{i}", f"g{i}", 0.0) for i in range(4, groups)])
    leases = LeaseStore(a.engine, "a", 30)
    leases.renew()
    assert len(leases.claim(groups)) == groups
    board = SqlStatusBoard(a.engine, "a")
    entries = [entry("g0", "a", at=100.0)] + [entry(f"g{i}", "a", at=200.0) for i in range(groups)]
    assert board.publish(entries) == groups
    reports = board.read()
    assert len(reports) == groups
    assert {r.evaluated_at for r in reports} == {200.0}, "g0 as its last entry"


def test_a_report_is_stored_as_written_whatever_its_groups_name(stores: Any) -> None:
    """The chunk travels as one JSON document: names with quotes, backslashes and letters
    beyond ASCII arrive intact, and each stored report is the text encode_report wrote."""
    from spark_offset_sidecar.core.ledger.changes import QueryRegistered

    a, _ = stores
    names = ['g"quoted"', "g\\back\\slash", "g-ünïcødé-組", "g'single'"]
    a.persist([QueryRegistered(f"q-{i}", name, 0.0) for i, name in enumerate(names)])
    leases = LeaseStore(a.engine, "a", 30)
    leases.renew()
    leases.claim(len(names) + 4)
    board = SqlStatusBoard(a.engine, "a")
    published = [entry(name, "a", lag=LAG) for name in names]
    assert board.publish(published) == len(names)
    assert {_group_id(r): r for r in board.read(names)} == {
        _group_id(e.report): e.report for e in published
    }
    with a.engine.connect() as conn:
        stored = dict(conn.execute(text("SELECT group_id, report FROM group_reports")).all())
    assert {name: stored[name] for name in names} == {
        e.report.status.group_id: encode_report(e.report) for e in published
    }


def test_a_figure_that_is_not_a_number_costs_its_neighbours_nothing(stores: Any) -> None:
    """NaN and Infinity are not JSON, and the chunk travels as JSON: a report holding them
    is written beside the others all the same, and reads back as it was."""
    import dataclasses
    import math

    a, _ = stores
    leases = LeaseStore(a.engine, "a", 30)
    leases.renew()
    leases.claim(4)
    odd_catch_up = dataclasses.replace(LAG.catch_up, eta_seconds=math.nan, consume_rate=math.inf)
    odd = entry("g1", "a", lag=dataclasses.replace(LAG, catch_up=odd_catch_up))
    good = [entry("g0", "a", lag=LAG), entry("g2", "a")]
    board = SqlStatusBoard(a.engine, "a")
    assert board.publish([good[0], odd, good[1]]) == 3
    g0, g1, g2 = board.read(["g0", "g1", "g2"])
    assert [g0, g2] == [e.report for e in good]
    assert g1.lag is not None
    assert math.isnan(g1.lag.catch_up.eta_seconds or 0.0)
    assert g1.lag.catch_up.consume_rate == math.inf
    assert dataclasses.replace(g1, lag=None) == dataclasses.replace(odd.report, lag=None)


def _group_id(report: GroupReport) -> str:
    return report.status.group_id
