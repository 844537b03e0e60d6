"""Time lag, data at risk and catch-up in the running app, and what ``/metrics`` exports
per group (granularity, filters, nothing that is zero by construction). In-process, with
in-memory log ends, record times and committer; the same against a real broker, real
timestamps and real deletions is ``tests/e2e/test_lag_in_time.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import BrokerUnavailable
from spark_offset_sidecar.observe.fleet_metrics import FleetExposition, FleetOptions, Relayed
from spark_offset_sidecar.testing import (
    InMemoryCommitter,
    InMemoryLogEnds,
    InMemoryRecordTimes,
    MemoryKafka,
)
from tests.support.app import doubles, post_progress, settings_for
from tests.support.service import metric, wait_for

GROUP = "orders-app"
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


def running(tmp_path: Path, ends: InMemoryLogEnds, times: InMemoryRecordTimes, **kw: Any) -> Any:
    clock = kw.pop("clock", None)
    settings = settings_for(tmp_path, lag_read_interval_seconds=0.05, **kw)
    extra = {"clock": clock} if clock is not None else {}
    parts = doubles(settings, MemoryKafka(log_ends=ends, record_times=times), **extra)
    app = create_app(settings, parts)
    return TestClient(app)


def listed(client: TestClient) -> list[str]:
    """The groups the watcher evaluated (``/v1/status``: its list alone)."""
    return [g["group"] for g in client.get("/v1/status").json()["groups"]]


def group_status(client: TestClient) -> Any:
    return client.get(f"/v1/status/{GROUP}").json()


def test_time_lag_reads_each_old_record_once_and_counts_a_loss_once(tmp_path: Path) -> None:
    clock = Clock()
    ends = InMemoryLogEnds({P0: 100, P1: 40})
    times = InMemoryRecordTimes()
    times.stamp(P0, 60, clock.now - 90)  # the oldest unprocessed record of partition 0
    with running(tmp_path, ends, times, clock=clock) as client:
        post_progress(client, 1, {"orders": {"0": 60, "1": 40}})
        listed = wait_for(
            lambda: [g for g in client.get("/v1/status").json()["groups"] if g["lag_seconds"]],
            what="a time lag",
        )
        assert listed[0]["lag_seconds"] == 90.0
        assert listed[0]["data_status"] == "OK"
        reads = len(times.asked)
        clock.now += 30  # an idle producer: the same record, 30 s older
        wait_for(lambda: group_status(client)["lag_seconds"] == 120.0, what="the age to grow")
        assert len(times.asked) == reads, "a record's timestamp is read once"
        assert times.asked == [{P0: 60}]
        # Retention deletes records 60-79 before the job reads them: LOST, counted once.
        ends.starts[P0] = 80
        oldest_at = clock.now - 50  # the oldest record kept, now the oldest unprocessed
        times.stamp(P0, 80, oldest_at)
        wait_for(lambda: group_status(client)["data_status"] == "LOST", what="LOST")
        for _ in range(3):
            clock.now += 1
            wait_for(lambda: group_status(client)["messages_lost"] == 20, what="20 lost")
        view = group_status(client)
        p0 = next(p for p in view["partitions"] if p["partition"] == 0)
        assert (p0["log_start_offset"], p0["lost"]) == (80, 20)
        assert p0["lag_seconds"] == clock.now - oldest_at  # evaluated now, on the last read
        text = client.get("/metrics").text
        labels = {"consumergroup": GROUP, "topic": "orders"}
        assert metric(text, "sidecar_consumergroup_messages_lost_total", **labels) == 20
        wait_for(
            lambda: (
                metric(
                    client.get("/metrics").text,
                    "sidecar_consumergroup_data_status",
                    consumergroup=GROUP,
                    status="LOST",
                )
                == 1
            ),
            what="the LOST series",
        )
        # The job moves past the gap (Spark's failOnDataLoss=false): nothing more is lost.
        post_progress(client, 2, {"orders": {"0": 100, "1": 40}})
        wait_for(lambda: group_status(client)["data_status"] == "OK", what="OK again")
        assert group_status(client)["messages_lost"] == 20
        assert group_status(client)["lag_seconds"] == 0.0


def test_a_failed_read_of_record_times_leaves_the_time_lag_unknown_not_zero(
    tmp_path: Path,
) -> None:
    from spark_offset_sidecar.errors import KafkaReadError

    ends = InMemoryLogEnds({P0: 100})
    times = InMemoryRecordTimes(fail_with=KafkaReadError("broker gone"))
    with running(tmp_path, ends, times) as client:
        post_progress(client, 1, {"orders": {"0": 60}})
        wait_for(lambda: len(times.asked) >= 2, what="two tries")
        view = group_status(client)
        assert view["totallag"] == 40
        assert view["lag_seconds"] is None
        text = client.get("/metrics").text
        assert metric(text, "sidecar_consumergroup_lag_seconds", consumergroup=GROUP) is None
        assert metric(text, "sidecar_record_time_reads_total", result="failed") >= 2  # type: ignore[operator]


def test_the_job_rates_of_its_progress_come_with_the_catch_up(tmp_path: Path) -> None:
    ends = InMemoryLogEnds({P0: 1000})
    with running(tmp_path, ends, InMemoryRecordTimes()) as client:
        progress = {"orders": {"0": 100}}
        from tests.support.service import spark_progress

        event = spark_progress(1, progress)
        event |= {"inputRowsPerSecond": 50.5, "processedRowsPerSecond": 400.0}
        event["batchDuration"] = 250
        client.post("/v1/progress", json={"group_id": GROUP, "progress": event})
        job = wait_for(lambda: (group_status(client).get("catch_up") or {}).get("job"), what="job")
        assert job["input_rows_per_second"] == 50.5
        assert job["processed_rows_per_second"] == 400.0
        assert job["batch_duration_ms"] == 250
        # Rates that are not finite numbers are left out, never refused.
        event = spark_progress(2, {"orders": {"0": 200}}) | {"inputRowsPerSecond": "NaN"}
        answer = client.post("/v1/progress", json={"group_id": GROUP, "progress": event})
        assert answer.status_code == 200


def test_the_status_page_shows_time_lag_risk_and_catch_up_a_page_at_a_time(
    tmp_path: Path,
) -> None:
    clock = Clock()
    ends = InMemoryLogEnds({TopicPartition(f"t{i}", 0): 100 for i in range(120)})
    times = InMemoryRecordTimes()
    for i in range(120):
        times.stamp(TopicPartition(f"t{i}", 0), 50, clock.now - 60 * i)
    with running(tmp_path, ends, times, clock=clock) as client:
        for i in range(120):
            post_progress(client, 1, {f"t{i}": {"0": 50}}, group=f"g{i:03}", query=f"q{i}")
        wait_for(
            lambda: (
                len([g for g in client.get("/v1/status").json()["groups"] if g["lag_seconds"]])
                == 119
            ),
            what="every time lag",
        )
        page = client.get("/ui").text
        assert "page 1 of 3 (120 groups)" in page
        assert page.index("g119") < page.index("g118")  # the latest first
        assert "1 h 59 min" in page  # g119's time lag
        second = client.get("/ui", params={"page": 2}).text
        assert "g119" not in second
        assert "page 2 of 3" in second
        found = client.get("/ui", params={"q": "g00"}).text
        assert "10 groups" in found
        assert "g010" not in found


COMMIT_SERIES = "sidecar_last_successful_commit_timestamp_seconds{"


def test_metrics_per_topic_by_default_per_partition_or_group_when_asked(tmp_path: Path) -> None:
    ends = InMemoryLogEnds({P0: 100, P1: 50, TopicPartition("audit", 0): 9})
    times = InMemoryRecordTimes()
    # The commit's series come with the memory the watcher is told (a second).
    for granularity, expected in [
        ("topic", {("orders",): 50}),
        ("partition", {("orders", "0"): 50, ("orders", "1"): 0}),
        ("group", {(): 50}),
    ]:
        folder = tmp_path / granularity
        folder.mkdir()
        with running(folder, ends, times, metrics_granularity=granularity) as client:
            post_progress(client, 1, {"orders": {"0": 50, "1": 50}, "audit": {"0": 9}})
            wait_for(lambda: group_status(client)["totallag"] == 50, what="the lag")
            text = wait_for(
                lambda: (
                    (t := client.get("/metrics").text)
                    and "sidecar_consumergroup_lag{" in t
                    and COMMIT_SERIES in t
                    and t
                ),
                what="the lag series and the commit's",
            )
            for labels, value in expected.items():
                keys = dict(zip(("topic", "partition"), labels, strict=False))
                assert metric(text, "sidecar_consumergroup_lag", consumergroup=GROUP, **keys) == (
                    value
                ), (granularity, labels)
            committed = metric(text, "sidecar_committed_offset", consumergroup=GROUP)
            assert (committed is not None) == (granularity == "partition")


def test_metrics_filters_leave_out_groups_and_topics(tmp_path: Path) -> None:
    ends = InMemoryLogEnds({P0: 100, TopicPartition("audit", 0): 9})
    with running(
        tmp_path,
        ends,
        InMemoryRecordTimes(),
        metrics_exclude_groups=("secret-*",),
        metrics_topics=("orders",),
    ) as client:
        post_progress(client, 1, {"orders": {"0": 50}, "audit": {"0": 1}})
        post_progress(client, 1, {"orders": {"0": 50}}, group="secret-app", query="q2")
        wait_for(lambda: group_status(client)["totallag"] == 58, what="the lag")
        text = wait_for(
            lambda: (t := client.get("/metrics").text) and "sidecar_consumergroup_lag{" in t and t,
            what="the lag series",
        )
        assert metric(text, "sidecar_consumergroup_lag", consumergroup=GROUP, topic="orders") == 50
        assert metric(text, "sidecar_consumergroup_lag", topic="audit") is None
        assert "secret-app" not in text


def test_scrapes_that_come_together_share_one_build() -> None:
    """Concurrent renders within ``max_age`` cost one build (what two Prometheus replicas
    and a dashboard do), the watcher's and its service's (which asks the watcher once)."""
    from spark_offset_sidecar.core.ledger.rules import Ledger
    from spark_offset_sidecar.runtime.watcher_memory import WatcherMemory

    ledger = Ledger()
    told = WatcherMemory(ledger, lambda _group, _rates: None)
    fleet = FleetExposition(lambda: ledger, lambda: None, told, FleetOptions(max_age=60))
    asked: list[None] = []

    async def share() -> bytes:
        asked.append(None)
        return (await fleet.rendered())[1]

    relayed = Relayed(lambda: b"# own\n", share, max_age=60)

    async def scrapes() -> list[tuple[bytes, bytes]]:
        return await asyncio.gather(*(page.rendered() for page in (fleet, relayed) * 5))

    bodies = asyncio.run(scrapes())
    assert (fleet.builds, relayed.builds, len(asked)) == (1, 1, 1)
    assert len(set(bodies[::2])) == len(set(bodies[1::2])) == 1
    assert bodies[1][0] == b"# own\n" + bodies[0][0]


def test_the_last_hour_of_lag_is_drawn_on_the_server(tmp_path: Path) -> None:
    clock = Clock()
    ends = InMemoryLogEnds({P0: 100})
    with running(tmp_path, ends, InMemoryRecordTimes(), clock=clock) as client:
        post_progress(client, 1, {"orders": {"0": 100}})
        wait_for(lambda: listed(client) == [GROUP], what="the watcher evaluated the group")
        wait_for(lambda: group_status(client)["totallag"] == 0, what="the commit known")
        # Reads are fresh when the clock moves: a minute's read is its point of the trend.
        start = clock.now - clock.now % 60
        for end in (100, 400, 900, 300):
            ends.ends[P0] = end
            clock.now += 60
            minute = clock.now - clock.now % 60
            wait_for(
                lambda: (t := group_status(client)["lag_trend"]) and t[-1][0] == minute,  # noqa: B023
                what=f"the point of minute {minute}",
            )
        trend = group_status(client)["lag_trend"]
        assert [lag for _, lag in trend[-4:]] == [0, 300, 800, 200]
        # A point before the clock first moved, if the watcher knew the commit by its first
        # read (the store follower and the first read race): the lag then, 0.
        assert trend[:-4] in ([], [[start, 0]])
        page = client.get("/ui").text
        assert "<polyline" in page
        assert 'aria-label="lag over the last hour, now 200, peak 800"' in page


def test_a_group_that_never_committed_has_no_lag_figures(tmp_path: Path) -> None:
    ends = InMemoryLogEnds({P0: 100})
    committer = InMemoryCommitter()
    committer.fail_with = BrokerUnavailable("down")
    settings = settings_for(tmp_path, lag_read_interval_seconds=0.05)
    app = create_app(
        settings,
        doubles(
            settings,
            MemoryKafka(committer=committer, log_ends=ends, record_times=InMemoryRecordTimes()),
        ),
    )
    with TestClient(app) as client:
        post_progress(client, 1, {"orders": {"0": 60}})
        wait_for(lambda: client.get("/v1/status").json()["groups"], what="a status")
        for view in (client.get("/v1/status").json()["groups"][0], group_status(client)):
            assert view["partitions"] == []
            assert (view["lag_seconds"], view["data_status"], view["catch_up"]) == (
                None,
                None,
                None,
            )
        page = client.get("/ui").text
        assert "caught up" not in page
