"""The watcher, ``offset-sidecar serve``'s child, on one real SQLite file and the real
broker: it follows what the service writes and shows each group's lag as Kafka has it,
through the service's port; the service exports its own series of ``/metrics``, the
watcher every per-group one, none twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from harness.processes import alive, children_running
from harness.service_process import ServiceProcess
from spark_offset_sidecar.adapters.child_process import child_command, frame
from spark_offset_sidecar.app.parts import production
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.app.watcher_brief import WatcherBrief
from spark_offset_sidecar.observe.metrics import package_version
from spark_offset_sidecar.settings import DatabaseSettings, KafkaSettings, Settings, StatusSettings
from spark_offset_sidecar.topology import Topology
from tests.support.app import post_progress
from tests.support.kafka import log_ends, produce, run_sync, unique_group
from tests.support.service import metric, spark_progress, wait_for

pytestmark = pytest.mark.kafka


def test_a_watcher_on_a_database_never_migrated_refuses_to_start_and_says_why(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """From a cold start (an empty folder): the watcher never migrates (its service does,
    before starting it)."""
    settings = Settings.from_env(ServiceProcess(tmp_path, kafka_bootstrap).env)
    topology = Topology.resolve(replicated=False, database=settings.database.url)
    done = subprocess.run(
        child_command("watcher", "INFO", "text"),
        cwd=tmp_path,
        input=frame((0, WatcherBrief(settings=settings, topology=topology).encode())),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert b"a watcher never migrates" in done.stderr + done.stdout


def test_a_service_built_in_code_hands_its_watcher_its_own_settings(
    tmp_path: Path,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its watcher child runs with the settings the service was built with, not with the
    environment's (``app.watcher_brief``): here the environment names another database
    and a setting no service would take."""
    elsewhere = tmp_path / "elsewhere.db"
    monkeypatch.setenv("SIDECAR_DATABASE_URL", f"sqlite:///{elsewhere}")
    monkeypatch.setenv("SIDECAR_LAG_READ_INTERVAL_SECONDS", "not a number")
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap),
        database=DatabaseSettings(url=f"sqlite:///{tmp_path / 'sidecar.db'}"),
        status=StatusSettings(lag_read_interval_seconds=0.2),
    )
    topic, group = new_topic(partitions=1), unique_group("in-code")
    with TestClient(create_app(settings, production(settings))) as client:
        assert client.get("/readyz").text == "ok\n"  # and its watcher answered ready
        assert client.get("/v1/service").json()["watcher"] == "child"
        assert post_progress(client, 1, {topic: {"0": 0}}, group=group).status_code == 200
        wait_for(  # the list is the watcher's alone, read from the service's database
            lambda: [g["group"] for g in client.get("/v1/status").json()["groups"]] == [group],
            what="the watcher's list of groups",
        )
    assert not elsewhere.exists()


def watchers_of(pid: int) -> list[int]:
    """The watcher children of ``serve``'s process ``pid`` (beside them: its writer)."""
    return children_running(pid, "watcher")


def test_a_service_with_its_watcher_as_a_child_answers_every_reader_on_its_port(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """One command, one port: readers answered through the service by its watcher, each
    per-group series exported once between them; the watcher killed is started again, and
    the service killed takes its watcher with it."""
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, commit_timeout_seconds=5, lag_read_interval_seconds=1
    ).start()
    try:
        # Ready means its readers are answered (the child's first readiness is awaited).
        assert service.http.get("/v1/status").status_code == 200
        # A group's name of any bytes reaches the watcher as sent, and is refused there.
        odd = service.http.get("/v1/status/a%00b")
        assert 400 <= odd.status_code < 500, odd.text
        topic = new_topic(partitions=2)
        run_sync(produce(kafka_bootstrap, topic, 40))
        ends = log_ends(kafka_bootstrap, [topic])
        group = unique_group("child")
        half = {topic: {str(p): end // 2 for (_, p), end in ends.items()}}
        assert service.post_progress(group, spark_progress(1, half)).status_code == 200
        behind = sum(end - end // 2 for end in ends.values())

        def lag() -> object:
            found = service.http.get(f"/v1/status/{group}")
            return found.json().get("totallag") if found.status_code == 200 else None

        wait_for(lambda: lag() == behind, timeout=60, what="the forwarded status's lag")
        assert service.http.get("/ui").status_code == 200
        lag_series = ("sidecar_consumergroup_lag", {"consumergroup": group, "topic": topic})
        succeeded = "sidecar_commits_succeeded_total"
        text = wait_for(  # as of the watcher's last evaluation (a status: evaluated now)
            lambda: (
                (t := service.metrics())
                and metric(t, *lag_series[:1], **lag_series[1])
                and metric(t, succeeded, consumergroup=group)  # told within a second
                and t
            ),
            timeout=30,
            what="the watcher's lag series and the group's counters through the service",
        )
        assert metric(text, lag_series[0], **lag_series[1]) == behind
        families = [f.name for f in text_string_to_metric_families(text)]
        assert len(families) == len(set(families)), "each family once"
        counted = metric(text, succeeded, consumergroup=group)
        assert (counted or 0) >= 1
        plain = service.http.get("/metrics", headers={"accept-encoding": "identity"})
        assert metric(plain.text, lag_series[0], **lag_series[1]) == behind  # gzip or not
        assert (metric(text, "sidecar_log_end_reads_total", result="succeeded") or 0) >= 1
        assert metric(text, "sidecar_pending_checkpoints", consumergroup=group) == 0
        assert service.http.get("/v1/service").json() == {
            "version": package_version(),
            "watcher": "child",
            "writer": "child",
            "replicated": False,
            "database": "sqlite",
        }

        assert service.process is not None
        (first,) = wait_for(lambda: watchers_of(service.process.pid), what="the watcher child")
        os.kill(first, signal.SIGKILL)
        second = wait_for(
            lambda: [c for c in watchers_of(service.process.pid) if c != first],
            timeout=30,
            what="the watcher started again",
        )[0]
        seen: list[float | None] = []

        def counted_again() -> bool:
            seen.append(metric(service.metrics(), succeeded, consumergroup=group))
            return seen[-1] is not None

        wait_for(counted_again, timeout=60, what="the counters from the watcher started again")
        # Absent while the new watcher is not told yet, never back to 0 (a reset).
        assert all(value is None or value >= (counted or 0) for value in seen), seen
        wait_for(lambda: lag() == behind, timeout=60, what="the status again")
        service.kill()
        wait_for(lambda: not alive(second), timeout=30, what="the watcher ending with its service")
    finally:
        service.stop()


def test_a_child_watcher_reads_each_group_as_the_services_memory_has_it(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """What the store does not hold is told to the child (``runtime.memory_relay``): a
    group whose commits Kafka refuses (a consumer is a member of it) reads ERR with its
    consecutive failures through the service's port, again from a watcher started anew,
    and OK once the member left and the retry committed."""
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, commit_timeout_seconds=5, lag_read_interval_seconds=1,
        retry_initial_seconds=0.2, retry_max_seconds=1, status_err_after_failures=2,
    ).start()  # fmt: skip
    assert service.process is not None
    pid = service.process.pid

    def kill_the_child() -> None:
        (first,) = wait_for(lambda: watchers_of(pid), what="the watcher child")
        os.kill(first, signal.SIGKILL)
        wait_for(
            lambda: [c for c in watchers_of(pid) if c != first],
            timeout=30,
            what="the watcher started again",
        )

    try:
        _failures_told_and_cleared(service, service, kill_the_child, kafka_bootstrap, new_topic)
    finally:
        service.stop()


def _failures_told_and_cleared(
    service: ServiceProcess,
    reader: ServiceProcess,
    restart_watcher: Callable[[], None],
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
) -> None:
    topic, group = new_topic(partitions=1), unique_group("told")
    run_sync(produce(kafka_bootstrap, topic, 10))

    async def join_and_hold() -> AIOKafkaConsumer:
        member = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group)
        await member.start()
        await member.getmany(timeout_ms=3000)  # joined, partitions assigned
        return member

    def status() -> dict[str, object]:
        found = reader.http.get(f"/v1/status/{group}")
        return found.json() if found.status_code == 200 else {}

    def failing() -> dict[str, object] | None:
        seen = status()
        failures = seen.get("consecutive_failures")
        return seen if isinstance(failures, int) and failures >= 2 else None

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    member = asyncio.run_coroutine_threadsafe(join_and_hold(), loop).result(30)
    try:
        assert service.post_progress(group, spark_progress(0, {topic: {"0": 5}})).status_code == 200
        seen = wait_for(failing, timeout=60, what="the watcher's status counting the failures")
        assert seen["status"] == "ERR"

        restart_watcher()
        seen = wait_for(failing, timeout=60, what="the new watcher told the failures")
        assert seen["status"] == "ERR"
    finally:
        asyncio.run_coroutine_threadsafe(member.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
    wait_for(
        lambda: status().get("consecutive_failures") == 0 and status()["status"] != "ERR",
        timeout=60,
        what="the group committed once the member left",
    )


def test_a_child_watcher_knows_a_new_group_and_a_followed_folder_at_once(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The child follows the store a step behind the service: a group just taken is
    answered on ``/v1/status/{group}`` at once (by the service until the child knows it,
    never 404), and the child reads it from the store long before its next step (its
    interval here: 10 minutes), because being told of it wakes its follower. A followed
    folder is on the child's ``/ui``."""
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, commit_timeout_seconds=5, lag_read_interval_seconds=600
    ).start()
    try:
        assert service.process is not None
        wait_for(lambda: watchers_of(service.process.pid), what="the watcher child")
        topic, group = new_topic(1), unique_group("new-to-child")
        event = spark_progress(0, {topic: {"0": 0}})
        assert service.post_progress(group, event).status_code == 200
        first = service.http.get(f"/v1/status/{group}")
        assert (first.status_code, first.json()["group"]) == (200, group), first.text
        wait_for(  # the database's series of a group are the child's alone
            lambda: (
                metric(service.metrics(), "sidecar_pending_checkpoints", consumergroup=group)
                is not None
            ),
            timeout=60,
            what="the child's own series of the new group (600 s between its steps)",
        )
        folder = tmp_path / "checkpoints" / "orders"
        answer = service.http.post(
            "/v1/followed-folders", json={"path": str(folder), "group_id": "folder-group"}
        )
        assert answer.status_code in (200, 201), answer.text
        assert str(folder) in service.http.get("/ui").text  # listed from the store
    finally:
        service.stop()
