"""Faults against the real service process and the real broker: nothing accepted is lost,
no committed offset ever moves backwards. Run alone with ``pytest -m faults``.

Figures (trials, events, recovery times) are printed; ``pytest -s`` shows them.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from bench.figures import rss_kib
from harness.kafka_broker import LocalBroker
from harness.machine import ROOT
from harness.processes import children_running
from harness.service_process import ServiceProcess
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.settings import DatabaseSettings, Settings
from tests.support.app import doubles
from tests.support.bench_output import check_cpu_columns
from tests.support.kafka import create_topics, run_sync, unique_group
from tests.support.offset_watch import OffsetWatch
from tests.support.service import (
    QUERY,
    counted_metrics,
    metric,
    metric_sum,
    spark_progress,
    wait_for,
)

pytestmark = [pytest.mark.faults, pytest.mark.kafka]

TRIALS = int(os.environ.get("FAULT_KILL_TRIALS", "20"))


def batch_offsets(topic: str, batch: int, partitions: int = 3) -> dict[str, dict[str, int]]:
    return {topic: {str(p): batch * 10 + p for p in range(partitions)}}


def expected(topic: str, batch: int, partitions: int = 3) -> dict[tuple[str, int], int]:
    return {(topic, p): batch * 10 + p for p in range(partitions)}


def test_replayed_reordered_duplicated_events_never_regress_or_lose_the_newest(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(3), unique_group("chaos")
    batches = list(range(40))
    deliveries = batches + random.Random(7).choices(batches, k=80)  # retries and replays
    random.Random(11).shuffle(deliveries)
    service = ServiceProcess(tmp_path, kafka_bootstrap).start()
    try:
        with OffsetWatch(kafka_bootstrap, group) as watch:
            outcomes: dict[str, int] = {}
            for batch in deliveries:
                answer = service.post_progress(
                    group, spark_progress(batch, batch_offsets(topic, batch))
                )
                assert answer.status_code == 200, answer.text
                outcomes[answer.json()["outcome"]] = outcomes.get(answer.json()["outcome"], 0) + 1
            watch.wait_for(expected(topic, 39), timeout=30)
        assert watch.regressions == []
        print(
            f"\nreplay: {len(deliveries)} deliveries of 40 batches -> {outcomes}, "
            f"{len(watch.history)} distinct committed states, 0 regressions"
        )
    finally:
        service.stop()


def _post_quietly(
    service: ServiceProcess, group: str, batch: int, topic: str, box: dict[str, httpx.Response]
) -> None:
    with contextlib.suppress(httpx.TransportError):
        box["answer"] = service.post_progress(
            group, spark_progress(batch, batch_offsets(topic, batch))
        )


def test_sigkill_at_random_moments_loses_nothing_accepted(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(3), unique_group("kill")
    rng = random.Random(2026)
    service = ServiceProcess(tmp_path, kafka_bootstrap, commit_timeout_seconds=5)
    batch, accepted, newest_accepted, unanswered = 0, 0, -1, 0
    with OffsetWatch(kafka_bootstrap, group) as watch:
        for _trial in range(TRIALS):
            service.start()
            view = service.query(QUERY) if newest_accepted >= 0 else None
            if view is not None:  # every 2xx before the kill is reflected after it
                assert view["last_completed_checkpoint"] >= newest_accepted
            for _ in range(rng.randint(3, 25)):
                try:
                    answer = service.post_progress(
                        group, spark_progress(batch, batch_offsets(topic, batch))
                    )
                except httpx.TransportError:
                    unanswered += 1
                    break
                if answer.status_code == 200:
                    accepted += 1
                    newest_accepted = batch
                batch += 1
            if rng.random() < 0.5:  # kill while a request is on its way
                answer_box: dict[str, httpx.Response] = {}
                in_flight = threading.Thread(
                    target=_post_quietly,
                    args=(service, group, batch, topic, answer_box),
                )
                in_flight.start()
                time.sleep(rng.uniform(0, 0.01))
                service.kill()
                in_flight.join()
                if "answer" in answer_box and answer_box["answer"].status_code == 200:
                    accepted += 1
                    newest_accepted = batch
                else:
                    unanswered += 1
                batch += 1
                continue
            service.kill()
        service.start()
        try:
            view = service.query(QUERY)
            assert view["last_completed_checkpoint"] >= newest_accepted
            final = view["last_completed_checkpoint"]
            recovery = watch.wait_for(expected(topic, final), timeout=30)
        finally:
            service.stop()
    assert watch.regressions == []
    print(
        f"\nSIGKILL: {TRIALS} trials, {batch} events sent, {accepted} accepted (2xx), "
        f"{unanswered} cut off by the kill, "
        f"newest accepted batch {newest_accepted}, reflected after restart: all; "
        f"final committed = batch {final} in {recovery:.2f} s; regressions 0"
    )


WRITER_KILLS = int(os.environ.get("FAULT_WRITER_KILLS", "5"))


def test_the_batches_writer_killed_under_load_loses_nothing_accepted(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """``serve`` writes the batches in a child process: SIGKILLed at random moments while
    four jobs post, each batch it left unanswered is answered 503 (written or not) and
    read back, its caller's retry is accepted or a duplicate, the service stays up and
    never answers anything else, every 2xx stays reflected, each loss is counted once,
    and Kafka ends at each job's newest batch without ever moving back."""
    topic = new_topic(3)
    groups = [unique_group(f"writer-{n}") for n in range(4)]
    service = ServiceProcess(tmp_path, kafka_bootstrap, commit_timeout_seconds=5).start()
    assert service.process is not None
    stop = threading.Event()
    statuses: dict[int, int] = {}
    newest: dict[str, int] = {}
    lost_answers: list[str] = []

    def post(group: str, query: str) -> None:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            batch = 0
            while not stop.is_set():
                body = {"group_id": group, "progress": spark_progress(
                    batch, batch_offsets(topic, batch), query=query
                )}  # fmt: skip
                answer = http.post("/v1/progress", json=body)
                statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
                if answer.status_code == 503:
                    lost_answers.append(answer.text)
                    continue  # the same batch again, as the listener retries
                assert answer.status_code == 200, answer.text
                assert answer.json()["outcome"] in ("accepted", "duplicate"), answer.text
                newest[query] = batch
                batch += 1

    def writer() -> int:
        assert service.process is not None
        return wait_for(
            lambda: children_running(service.process.pid, "writer"),
            what="the service's writer process",
        )[0]

    watches = [OffsetWatch(kafka_bootstrap, group) for group in groups]
    posters = [
        threading.Thread(target=post, args=(group, f"q-writer-{n}"))
        for n, group in enumerate(groups)
    ]
    rng = random.Random(47)
    try:
        for watch in watches:
            watch.__enter__()
        for poster in posters:
            poster.start()
        for _ in range(WRITER_KILLS):
            victim = writer()
            time.sleep(rng.uniform(0.05, 0.5))
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda v=victim: writer() != v, timeout=30, what="a new writer")
        time.sleep(0.5)
        stop.set()
        for poster in posters:
            poster.join(30)
        assert set(statuses) <= {200, 503}, statuses
        # A lost batch holds up to one event of each job: each hears 503.
        assert 1 <= statuses.get(503, 0) <= WRITER_KILLS * len(groups), statuses
        lost = re.compile(r"writer process (was killed by SIGKILL|exited with status \d+)")
        assert all(lost.search(text) for text in lost_answers), lost_answers
        assert metric(service.metrics(), "sidecar_store_writer_lost_total") == WRITER_KILLS
        for n, (group, watch) in enumerate(zip(groups, watches, strict=True)):
            final = newest[f"q-writer-{n}"]
            view = service.query(f"q-writer-{n}")
            assert view["last_completed_checkpoint"] == final, (group, view)
            watch.wait_for(expected(topic, final), timeout=60)
            assert watch.regressions == []
    finally:
        stop.set()
        for watch in watches:
            watch.__exit__(None, None, None)
        service.stop()
    print(f"\nwriter SIGKILLed {WRITER_KILLS} times under load: answers {statuses}")


OUTAGE = float(os.environ.get("FAULT_OUTAGE_SECONDS", "30"))


def _failures(service: ServiceProcess, group: str) -> float:
    return metric_sum(service.metrics(), "sidecar_commits_failed_total", consumergroup=group)


@pytest.mark.long
def test_broker_outage_keeps_the_service_live_and_commits_the_newest_on_return(
    tmp_path: Path, private_broker: LocalBroker
) -> None:
    bootstrap, topic, group = private_broker.bootstrap, "outage", unique_group("outage")
    run_sync(create_topics(bootstrap, [topic], 3))
    service = ServiceProcess(tmp_path, bootstrap, commit_timeout_seconds=3).start()
    assert service.process is not None
    try:
        with OffsetWatch(bootstrap, group) as watch:
            service.post_progress(group, spark_progress(0, batch_offsets(topic, 0)))
            watch.wait_for(expected(topic, 0), timeout=30)
            rss_before = rss_kib(service.process.pid)

            private_broker.stop()
            batch, started = 0, time.monotonic()
            while time.monotonic() - started < OUTAGE:  # Spark goes on: a batch every 0.25 s
                batch += 1
                answer = service.post_progress(
                    group, spark_progress(batch, batch_offsets(topic, batch))
                )
                assert answer.status_code == 200, "callbacks are answered while Kafka is down"
                assert service.http.get("/livez").status_code == 200
                time.sleep(0.25)
            rss_during = rss_kib(service.process.pid)
            text = service.metrics()
            by_reason = "sidecar_commits_failed_by_reason_total"
            failed = sum(
                metric(text, by_reason, consumergroup=group, reason=r) or 0
                for r in ("broker_unavailable", "timeout", "kafka_error")
            )
            assert failed >= 1, "failures are counted with a reason"
            # A broker that is gone is what it is, not an unexpected error.
            assert metric(text, by_reason, consumergroup=group, reason="kafka_error") is None
            assert metric(text, by_reason, consumergroup=group, reason="broker_unavailable")
            skipped = metric(text, "sidecar_commits_skipped_total", consumergroup=group)

            private_broker.start()  # returns once it answers metadata requests
            back = time.monotonic()
            service.post_progress(group, spark_progress(batch + 1, batch_offsets(topic, batch + 1)))
            watch.wait_for(expected(topic, batch + 1), timeout=60)
            streaming_recovery = time.monotonic() - back

            # An idle query: nothing new arrives after the outage; the retry must do it, and
            # the worst case is measured: the broker returns once the backoff is at its cap
            # (the 6th consecutive failure waits 0.5 s * 2**5, capped at 10 s).
            failed_before = _failures(service, group)
            private_broker.stop()
            service.post_progress(group, spark_progress(batch + 2, batch_offsets(topic, batch + 2)))
            wait_for(
                lambda: _failures(service, group) - failed_before >= 6,
                timeout=180,
                what="six consecutive failed retries",
            )
            private_broker.start()
            back = time.monotonic()
            watch.wait_for(expected(topic, batch + 2), timeout=60)
            idle_recovery = time.monotonic() - back
        assert watch.regressions == []
        rss_after = rss_kib(service.process.pid)
        reasons = {
            r: metric(
                service.metrics(),
                "sidecar_commits_failed_by_reason_total",
                consumergroup=group,
                reason=r,
            )
            for r in ("broker_unavailable", "timeout", "kafka_error")
        }
        print(
            f"\noutage: {OUTAGE:.0f} s, {batch} events answered 200 during it, failures {reasons}, "
            f"skipped {skipped}; newest committed {streaming_recovery:.2f} s after the broker "
            f"answered (stream going on), {idle_recovery:.2f} s (idle query, retry only); "
            f"RSS {rss_before} -> {rss_during} -> {rss_after} KiB"
        )
        assert rss_during - rss_before < 50_000, "memory bounded: the slot coalesces"
    finally:
        service.stop()


class SmallSqliteStore(SqlStore):
    """A SQLite file that can grow to ``pages`` pages: a real SQLITE_FULL, as a full disk
    gives it."""

    def __init__(self, url: str, pages: int) -> None:
        super().__init__(url)
        self.migrate()
        self.engine.dispose()

        @event.listens_for(self.engine, "connect")
        def _limit(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.execute(f"PRAGMA max_page_count={pages}")

    def migrate(self) -> None:
        if not getattr(self, "_migrated", False):
            super().migrate()
            self._migrated = True


def _many_partitions(batch: int) -> dict[str, dict[str, int]]:
    return {f"topic-{t}": {str(p): batch * 1000 + p for p in range(50)} for t in range(4)}


def _state(client: TestClient) -> Any:
    return [
        (q["query_id"], q["last_completed_checkpoint"], q["pending_checkpoints"])
        for q in client.get("/v1/queries").json()
    ]


def test_full_database_answers_503_and_keeps_what_was_accepted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'small.db'}"
    store = SmallSqliteStore(url, pages=60)
    settings = Settings(database=DatabaseSettings(url=url))
    app = create_app(settings, doubles(settings, store=store))
    last_accepted, refused = -1, None
    with TestClient(app) as client:
        for batch in range(400):  # one query each: every event adds rows
            answer = client.post(
                "/v1/progress",
                json={
                    "group_id": f"g-{batch}",
                    "progress": spark_progress(batch, _many_partitions(batch), query=f"q-{batch}"),
                },
            )
            if answer.status_code != 200:
                refused = answer
                break
            last_accepted = batch
        assert refused is not None, "the database never filled up"
        assert refused.status_code == 503
        assert "full" in refused.json()["detail"]
        accepted = [(f"q-{b}", b, []) for b in range(last_accepted + 1)]
        assert sorted(_state(client)) == sorted(accepted)
    # A new process on the same file sees exactly what was accepted, nothing half-written.
    with TestClient(create_app(settings, doubles(settings))) as client:
        assert sorted(_state(client)) == sorted(accepted)
    print(f"\nfull database: {last_accepted + 1} events stored, the next answered 503")


def test_read_only_database_answers_503(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    writable = f"sqlite:///{path}"
    settings = Settings(database=DatabaseSettings(url=writable))
    with TestClient(create_app(settings, doubles(settings))) as client:
        assert (
            client.post(
                "/v1/progress",
                json={"group_id": "g", "progress": spark_progress(1, {"t": {"0": 1}})},
            ).status_code
            == 200
        )
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"
    settings = Settings(database=DatabaseSettings(url=read_only))
    with TestClient(create_app(settings, doubles(settings))) as client:
        answer = client.post(
            "/v1/progress", json={"group_id": "g", "progress": spark_progress(2, {"t": {"0": 2}})}
        )
        assert answer.status_code == 503
        assert "readonly" in answer.json()["detail"]
        assert _state(client) == [(QUERY, 1, [])]


def test_lost_postgresql_connection_answers_503_then_recovers(postgres_server: Any) -> None:
    postgres_server.reset()
    settings = Settings(database=DatabaseSettings(url=postgres_server.url))
    with TestClient(create_app(settings, doubles(settings))) as client:

        def post(batch: int) -> Any:
            return client.post(
                "/v1/progress",
                json={"group_id": "g", "progress": spark_progress(batch, {"t": {"0": batch}})},
            )

        assert post(1).status_code == 200
        postgres_server.halt()
        try:
            lost = post(2)
            assert lost.status_code == 503, lost.text
            assert client.get("/readyz").status_code == 503
            assert client.get("/livez").status_code == 200, "not a reason to restart the pod"
            assert _state(client) == [(QUERY, 1, [])]
        finally:
            postgres_server.start()
        assert wait_for(lambda: post(2).status_code == 200, timeout=30)
        assert client.get("/readyz").status_code == 200
        assert _state(client) == [(QUERY, 2, [])]


def test_slow_broker_coalesces_and_catches_up(tmp_path: Path, private_broker: LocalBroker) -> None:
    """Slow, not down: the broker is frozen 400 ms of every 500 ms for 20 s."""
    bootstrap, topic, group = private_broker.bootstrap, "slow", unique_group("slow")
    run_sync(create_topics(bootstrap, [topic], 3))
    service = ServiceProcess(tmp_path, bootstrap, commit_timeout_seconds=10).start()
    assert service.process is not None
    stop = threading.Event()

    def throttle() -> None:
        while not stop.is_set():
            private_broker.pause()
            time.sleep(0.4)
            private_broker.resume()
            time.sleep(0.1)

    try:
        with OffsetWatch(bootstrap, group) as watch:
            service.post_progress(group, spark_progress(0, batch_offsets(topic, 0)))
            watch.wait_for(expected(topic, 0), timeout=30)
            rss_before = rss_kib(service.process.pid)
            slow = threading.Thread(target=throttle, daemon=True)
            slow.start()
            batch, started, answer_ms = 0, time.monotonic(), []
            while time.monotonic() - started < 20:
                batch += 1
                sent = time.monotonic()
                answer = service.post_progress(
                    group, spark_progress(batch, batch_offsets(topic, batch))
                )
                answer_ms.append((time.monotonic() - sent) * 1000)
                assert answer.status_code == 200
                time.sleep(0.1)
            stop.set()
            slow.join()
            private_broker.resume()
            caught_up = watch.wait_for(expected(topic, batch), timeout=30)
        text = counted_metrics(service.http, QUERY, group)
        labels = {"consumergroup": group}
        succeeded = metric(text, "sidecar_commits_succeeded_total", **labels) or 0
        skipped = metric(text, "sidecar_commits_skipped_total", **labels) or 0
        assert watch.regressions == []
        assert skipped > 0, "completions arriving faster than commits replace each other"
        assert succeeded < batch, (
            "fewer commits than checkpoints: one in flight, the rest coalesced"
        )
        rss_after = rss_kib(service.process.pid)
        print(
            f"\nslow broker: {batch} events in 20 s (answered in p50 "
            f"{sorted(answer_ms)[len(answer_ms) // 2]:.1f} ms), {succeeded:.0f} commits, "
            f"{skipped:.0f} skipped; newest committed {caught_up:.2f} s after the broker "
            f"recovered; RSS {rss_before} -> {rss_after} KiB"
        )
    finally:
        stop.set()
        private_broker.resume()
        service.stop()


def test_soak_short_form(kafka_bootstrap: str) -> None:
    """``python -m bench soak`` for 45 s, through the benchmarks' runner (so this is also
    that scenario's smoke run): no error, memory and descriptors flat after warm-up, and
    its table with each side's CPU."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "soak", "--bootstrap", kafka_bootstrap,
         "--seconds", "45", "--queries", "300", "--rate", "200"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    print("\n" + done.stdout[-2000:])
    assert done.returncode == 0, f"soak failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    ((header, (row,)),) = check_cpu_columns("soak", done.stdout)
    cell = dict(zip(header, row, strict=True))
    assert cell["errors"] == "0"
    warm = float(next(v for k, v in cell.items() if k.startswith("RSS MiB at t=")))
    assert float(cell["RSS MiB at the end"]) - warm < 20, "RSS grew by more than 20 MiB"
    fds_warm, fds_end = (int(n) for n in cell["fds warm -> end"].split(" -> "))
    assert abs(fds_end - fds_warm) < 50, "file descriptors are not flat"
