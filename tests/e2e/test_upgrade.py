"""Upgrades and downgrades as operators run them (docs/run/upgrade.md).

A rolling upgrade under load: three replicas of the previous release (``releases.toml``,
rebuilt from git by the ``previous_release`` fixture) on one real PostgreSQL and the real
broker, jobs posting every group's batches at a bounded rate to whichever replica a
Service would route to, retrying as the listeners do (the retriable statuses of
``spark_offset_listener.sender``, connection errors, the same backoff); each replica
replaced in turn by this release (SIGTERM, this release started on the same database,
which its first replica migrates, ready on ``/readyz``), then each put back to the
previous release (the rollback the window allows: this release's migration 0009 still
serves the previous release, ``adapters.sql.migrate``). A client of the test's own reads
every group's committed offsets from Kafka every 200 ms, and another every replica's
``/readyz`` every 100 ms. Held: no acknowledged (2xx) checkpoint lost, no partition ever
moved backwards, no group committed by two replicas at once, every group at its newest
checkpoint at the end, nothing counted invalid, each replica's watcher its child in both
releases and gone with it, a replica always ready and, while replicas of the release
being replaced serve, one of them ready (the new schema serves them). Measured and
printed, per phase: each group's longest time without a commit, the fewest replicas
ready at once, every answer other than 2xx by status, and the connection errors.

And what must be refused is: serve and migrate on a database a release two ahead
migrated stop at once, saying so, and leave it as it was (the previous release too, on
one the release after this one migrated); the backup taken before the upgrade, restored
as the manual says, is the way back."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.machine import free_port
from harness.processes import alive, children_running
from harness.releases import BuiltRelease
from harness.replica_cluster import ReplicaCluster, overlapping_owners
from harness.service_process import ServiceProcess
from spark_offset_listener.sender import RETRIABLE_STATUS
from spark_offset_sidecar import __version__
from spark_offset_sidecar.adapters.sql import migrate
from tests.support.backups import page_blocks, run_script
from tests.support.databases import (
    NEWER_REVISION,
    NEXT_REVISION,
    a_group_in,
    as_a_newer_release_would,
    as_the_next_release_would,
    contents,
    migrated_by_a_newer_release,
    with_a_group,
)
from tests.support.in_thread import InThread
from tests.support.kafka import unique_group
from tests.support.offset_watch import GroupsWatch
from tests.support.service import metric_sum, spark_progress, wait_for

GROUPS = 6
PERIOD = 0.5  # s between a job's batches: 2 a second a group, 12 a second in all
REPLICAS = ("r0", "r1", "r2")


def _offsets(topic: str, batch: int, index: int) -> dict[str, dict[str, int]]:
    return {topic: {str(p): 100 * batch + 10 * index + p for p in range(2)}}


def _in_kafka(topic: str, batch: int, index: int) -> dict[tuple[str, int], int]:
    """``_offsets`` as Kafka holds them once committed."""
    return {(topic, int(p)): o for p, o in _offsets(topic, batch, index)[topic].items()}


class Endpoints:
    """The replicas a Service routes to, each request to the next in turn."""

    def __init__(self, urls: list[str]) -> None:
        self._urls = list(urls)
        self._lock = threading.Lock()
        self._turn = itertools.count()

    def next(self) -> str:
        with self._lock:
            return self._urls[next(self._turn) % len(self._urls)]

    def remove(self, url: str) -> None:
        with self._lock:
            self._urls.remove(url)

    def add(self, url: str) -> None:
        with self._lock:
            self._urls.append(url)


@dataclass
class Answers:
    """What the jobs were answered: ``statuses`` counts every answer by status and every
    connection error by kind; ``rejected`` lists answers a retry cannot fix."""

    statuses: Counter[str] = field(default_factory=Counter)
    rejected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, what: str) -> None:
        with self.lock:
            self.statuses[what] += 1

    def since(self, before: Counter[str]) -> dict[str, int]:
        """Every answer but 2xx since ``before`` (a copy of ``statuses``)."""
        with self.lock:
            now = self.statuses - before
        return {k: v for k, v in sorted(now.items()) if not k.startswith("2")}


class Job(InThread):
    """One Spark job's progress events, its next batch every ``PERIOD`` s, posted to the
    next endpoint; a retriable status or a connection error is sent again (to the next
    endpoint) after the listener's backoff, until answered. ``acknowledged``: the newest
    batch answered 2xx. Stopped, it still delivers the batch in hand."""

    JOIN_SECONDS = 60.0

    def __init__(
        self, group: str, index: int, topic: str, endpoints: Endpoints, answers: Answers
    ) -> None:
        self.group, self.index, self.topic = group, index, topic
        self.query = f"q-{index}-{group}"
        self.endpoints, self.answers = endpoints, answers
        self.acknowledged = -1
        super().__init__()

    def _loop(self) -> None:
        with httpx.Client(timeout=5) as http:
            next_at = time.monotonic()
            for batch in itertools.count():
                if self._stop.is_set():
                    return
                self._deliver(http, batch)
                next_at += PERIOD
                self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _deliver(self, http: httpx.Client, batch: int) -> None:
        progress = spark_progress(batch, _offsets(self.topic, batch, self.index), self.query)
        body = {"group_id": self.group, "progress": progress}
        for attempt in itertools.count(1):
            try:
                answer = http.post(f"{self.endpoints.next()}/v1/progress", json=body)
            except httpx.TransportError as exc:
                self.answers.count(f"connection error ({type(exc).__name__})")
            else:
                self.answers.count(str(answer.status_code))
                if answer.is_success:
                    self.acknowledged = batch
                    return
                if answer.status_code not in RETRIABLE_STATUS:
                    self.answers.rejected.append(f"{self.group} {batch}: {answer.text}")
                    return
            time.sleep(min(10.0, 0.2 * 2**attempt))  # the listeners' backoff


def _watchers(replica: ServiceProcess) -> list[int]:
    """The replica's watcher children: ``... cli watch`` (0.1.0), ``... child watcher``."""
    assert replica.process is not None
    pid = replica.process.pid
    return children_running(pid, "watch") + children_running(pid, "watcher")


def _version(replica: ServiceProcess) -> str:
    """The release the replica says it is (``sidecar_build_info``, in every release)."""
    for line in replica.metrics().splitlines():
        if line.startswith("sidecar_build_info{"):
            return line.split('version="', 1)[1].split('"', 1)[0]
    raise AssertionError("no sidecar_build_info")


class Readiness(InThread):
    """Every replica's ``/readyz``, every ``INTERVAL`` s, as a Service's probe sees it (an
    answer other than 200 in ``TIMEOUT`` s, or none: not ready). ``releases`` names each
    place's replica by its release, or ``STOPPING`` from its SIGTERM until the one in its
    place is ready (the roll keeps it); ``samples``: (time, {place: (release, ready)})."""

    INTERVAL = 0.1
    TIMEOUT = 2.0
    STOPPING = "stopping"

    def __init__(self, cluster: ReplicaCluster, release: str) -> None:
        self.cluster = cluster
        self.releases = dict.fromkeys(REPLICAS, release)
        self.samples: list[tuple[float, dict[str, tuple[str, bool]]]] = []
        super().__init__()

    def _loop(self) -> None:
        with httpx.Client(timeout=self.TIMEOUT) as http:
            while not self._stop.is_set():
                at = time.monotonic()
                self.samples.append((at, {name: self._seen(http, name) for name in REPLICAS}))
                self._stop.wait(max(0.0, at + self.INTERVAL - time.monotonic()))

    def _seen(self, http: httpx.Client, name: str) -> tuple[str, bool]:
        """The place's release and readiness; its release read after the answer (set to
        ``STOPPING`` before the SIGTERM: an answer after it is never taken for the old
        release's)."""
        try:
            ready = http.get(f"{self.cluster.replicas[name].url}/readyz").status_code == 200
        except httpx.TransportError:
            ready = False
        return self.releases[name], ready

    def between(self, start: float, end: float, old: str) -> tuple[int, int | None, int]:
        """The fewest replicas ready at once in [``start``, ``end``]; the fewest of
        release ``old`` ready at once while one of it served (None: never); samples."""
        ready, old_ready, count = len(REPLICAS), None, 0
        for at, seen in list(self.samples):
            if start <= at <= end:
                count += 1
                ready = min(ready, sum(up for _release, up in seen.values()))
                olds = [up for release, up in seen.values() if release == old]
                if olds:
                    old_ready = min(sum(olds), len(olds) if old_ready is None else old_ready)
        return ready, old_ready, count


@dataclass
class Phase:
    """One pass over the replicas, and what it measured."""

    name: str
    old: str  # the release replaced
    started: float = 0.0
    ended: float = 0.0
    steps: list[tuple[float, float]] = field(default_factory=list)  # s to exit, to ready
    answers: dict[str, int] = field(default_factory=dict)
    longest: tuple[float, str] = (0.0, "")  # without a commit, and which group
    gaps: dict[str, float] = field(default_factory=dict)  # each group's longest
    ready: tuple[int, int | None, int] = (0, None, 0)  # Readiness.between

    def report(self) -> str:
        steps = ", ".join(f"{exited:.1f} + {ready:.1f}" for exited, ready in self.steps)
        gaps = ", ".join(f"{gap:.1f}" for gap in sorted(self.gaps.values()))
        ready, old_ready, samples = self.ready
        return (
            f"{self.name}: {self.ended - self.started:.1f} s; each replica's SIGTERM to its "
            f"exit + the next one's start to ready: {steps} s; "
            f"longest without a commit {self.longest[0]:.2f} s ({self.longest[1]}), "
            f"each group's: {gaps} s; ready replicas at least {ready} of {len(REPLICAS)}, "
            f"of {self.old} at least {old_ready} while one served ({samples} samples of "
            f"/readyz); answers other than 2xx: {self.answers or 'none'}"
        )


@dataclass
class Rolling:
    """A cluster under the jobs' load, its replicas replaced one at a time."""

    cluster: ReplicaCluster
    endpoints: Endpoints
    jobs: list[Job]
    watch: GroupsWatch
    answers: Answers
    readiness: Readiness
    invalid: float = 0.0  # events counted invalid by replicas stopped so far

    def roll(self, phase: Phase, python: Path | str, release: str) -> None:
        """Each replica, in turn: SIGTERM, out of the endpoints once it has exited (a
        Service's endpoints lag), another of ``release`` started on the same database and
        taken in once ready; then, before the next, every group committed at least at
        what was acknowledged before the SIGTERM (nothing acknowledged lost)."""
        before = self.answers.statuses.copy()
        phase.started = time.monotonic()
        for name in REPLICAS:
            old = self.cluster.replicas[name]
            assert old.process is not None
            watchers = _watchers(old)
            assert len(watchers) == 1, f"{name}: watcher children {watchers}"
            self.invalid += metric_sum(old.metrics(), "sidecar_events_invalid_total")
            acknowledged = {job.group: job.acknowledged for job in self.jobs}
            began = time.monotonic()
            self.readiness.releases[name] = Readiness.STOPPING
            old.process.send_signal(signal.SIGTERM)
            old.process.wait(60)
            exited = time.monotonic()
            self.endpoints.remove(old.url)
            assert not any(alive(pid) for pid in watchers), "the watcher outlived its replica"
            new = self.cluster.replace(name, python)
            self.readiness.releases[name] = release
            self.endpoints.add(new.url)
            phase.steps.append((exited - began, time.monotonic() - exited))
            assert _version(new) == release
            assert len(_watchers(new)) == 1
            self.committed_at_least(acknowledged, f"after {name} became {release}")
        phase.ended = time.monotonic()
        phase.answers = self.answers.since(before)
        phase.gaps = {
            group: timeline.longest_without_change(phase.started, phase.ended)
            for group, timeline in self.watch.timelines.items()
        }
        phase.longest = max((gap, group) for group, gap in phase.gaps.items())
        phase.ready = self.readiness.between(phase.started, phase.ended, phase.old)

    def committed_at_least(self, acknowledged: dict[str, int], what: str) -> None:
        for job in self.jobs:
            floor = _in_kafka(job.topic, acknowledged[job.group], job.index)
            timeline = self.watch.timelines[job.group]
            wait_for(
                lambda t=timeline, f=floor: all(t.latest.get(tp, -1) >= o for tp, o in f.items()),
                90,
                f"{job.group} committed at batch {acknowledged[job.group]} or later {what}",
            )


@pytest.fixture
def rolling(
    tmp_path: Path,
    kafka_bootstrap: str,
    postgres_server: Any,
    new_topic: Any,
    previous_release: BuiltRelease,
) -> Iterator[Rolling]:
    """Three replicas of the previous release (default settings: a 30 s lease), every
    group's job posting, the watch reading Kafka."""
    postgres_server.reset()
    topic = new_topic(partitions=2)
    groups = [unique_group("roll") for _ in range(GROUPS)]
    cluster = ReplicaCluster(
        tmp_path, kafka_bootstrap, postgres_server.url, len(REPLICAS), previous_release.python
    )
    try:
        cluster.start()
        endpoints = Endpoints([replica.url for replica in cluster.replicas.values()])
        answers = Answers()
        jobs = [Job(group, i, topic, endpoints, answers) for i, group in enumerate(groups)]
        watch = GroupsWatch(kafka_bootstrap, groups, interval=0.2)
        readiness = Readiness(cluster, previous_release.release.version)
        with watch, readiness:
            for job in jobs:
                job.__enter__()
            try:
                yield Rolling(cluster, endpoints, jobs, watch, answers, readiness)
            finally:
                for job in jobs:
                    job.__exit__(None, None, None)
    finally:
        cluster.stop()


@pytest.mark.long
@pytest.mark.faults
def test_a_rolling_upgrade_of_three_replicas_under_load_and_back_loses_nothing(
    rolling: Rolling, previous_release: BuiltRelease
) -> None:
    previous = previous_release.release.version
    cluster, jobs, watch = rolling.cluster, rolling.jobs, rolling.watch
    assert {_version(r) for r in cluster.replicas.values()} == {previous}
    rolling.committed_at_least({job.group: 0 for job in jobs}, "at the start")

    upgrade = Phase(f"upgrade {previous} -> {__version__}", previous)
    rolling.roll(upgrade, sys.executable, __version__)
    _served_throughout(upgrade)
    for replica in cluster.replicas.values():
        service = replica.http.get("/v1/service").json()
        assert (service["version"], service["watcher"], service["replicated"]) == (
            __version__,
            "child",
            True,
        )
    downgrade = Phase(f"downgrade {__version__} -> {previous}", __version__)
    rolling.roll(downgrade, previous_release.python, previous)
    _served_throughout(downgrade)

    for job in jobs:
        job.__exit__(None, None, None)  # each delivers the batch in hand, then stops
    for job in jobs:
        newest = _in_kafka(job.topic, job.acknowledged, job.index)
        timeline = watch.timelines[job.group]
        wait_for(
            lambda t=timeline, n=newest: t.latest == n,
            90,
            f"{job.group} at its newest batch {job.acknowledged}",
        )
        for replica in cluster.replicas.values():
            view = replica.query(job.query)
            assert view["last_completed_checkpoint"] == job.acknowledged, view
    assert rolling.answers.rejected == []
    assert {g: t.regressions for g, t in watch.timelines.items() if t.regressions} == {}
    invalid = rolling.invalid + sum(
        metric_sum(r.metrics(), "sidecar_events_invalid_total") for r in cluster.replicas.values()
    )
    assert invalid == 0
    assert overlapping_owners(cluster.commits()) == []
    by_group: dict[str, list[int]] = {}
    for commit in cluster.commits():
        by_group.setdefault(commit.group_id, []).append(commit.checkpoint_id)
    assert set(by_group) == {job.group for job in jobs}
    assert all(ids == sorted(ids) for ids in by_group.values())
    print(
        f"acknowledged: {sum(job.acknowledged + 1 for job in jobs)} batches of {len(jobs)} "
        "groups, every group committed at its newest; lost: none"
    )


def _served_throughout(phase: Phase) -> None:
    """The window, as ``/readyz`` showed it through ``phase`` (printed): a replica always
    ready, and one of the release replaced ready while any of it served."""
    print(f"\n{phase.report()}")
    ready, old_ready, samples = phase.ready
    assert samples > 0, phase.report()
    assert ready >= 1, phase.report()
    assert (old_ready or 0) >= 1, phase.report()


def _offset_sidecar(
    python: Path | str, command: str, url: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``offset-sidecar COMMAND`` of the release ``python`` has, on the database ``url``."""
    return subprocess.run(
        [str(python), "-m", "spark_offset_sidecar.cli", command],
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("SIDECAR_")},
            "SIDECAR_DATABASE_URL": url,
            "SIDECAR_PORT": str(free_port()),  # never bound, unless the refusal fails
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["migrate", "serve"])
def test_serve_and_migrate_refuse_a_database_a_newer_release_migrated_and_change_nothing(
    command: str, database_url: str, tmp_path: Path
) -> None:
    """The downgrade that is not allowed: this release on a database a release two ahead
    migrated (its marker a migration this release does not know). It exits non-zero at
    once, naming the migration, its own newest and what to do, and the database (its
    schema, its rows, both version tables) is as it was."""
    migrated_by_a_newer_release(database_url)
    before = contents(database_url)
    done = _offset_sidecar(sys.executable, command, database_url, tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("offset-sidecar: database "), said
    assert f"is at migration {NEWER_REVISION}, which release {__version__} does not know" in said
    assert f"its newest migration is {migrate.HEAD}" in said
    assert "Run that newer release" in said
    assert "restore the backup" in said
    assert contents(database_url) == before


@pytest.mark.parametrize(
    ("migrated_by", "marker"),
    [(as_the_next_release_would, migrate.HEAD), (as_a_newer_release_would, NEXT_REVISION)],
    ids=["the-next-release", "a-release-two-ahead"],
)
def test_the_previous_release_refuses_a_database_two_releases_ahead_of_it(
    migrated_by: Callable[[str], None],
    marker: str,
    database_url: str,
    tmp_path: Path,
    previous_release: BuiltRelease,
) -> None:
    """The release before this one, as released, on a database the release after this one
    migrated (two ahead of it: the marker at this release's head), or a later one: refused
    in its own words, naming the marker, and nothing changed (docs/run/upgrade.md)."""
    with_a_group(database_url)
    migrated_by(database_url)
    before = contents(database_url)
    done = _offset_sidecar(previous_release.python, "migrate", database_url, tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    version = previous_release.release.version
    assert f"is at migration {marker}, which release {version} does not know" in done.stderr
    assert contents(database_url) == before


PAGE_URL = "postgresql://sidecar@postgres:5432/sidecar"  # docs/run/upgrade.md's database


@pytest.mark.parametrize("backed_up_by", ["previous", "this"])
def test_the_previous_releases_backup_restored_as_the_page_says_serves_both_releases(
    backed_up_by: str, postgres_server: Any, tmp_path: Path, previous_release: BuiltRelease
) -> None:
    """The way back past a migration, as docs/run/upgrade.md gives it, its blocks run as
    written (the test's PostgreSQL for the page's): ``pg_dump`` before the upgrade, the
    restore after a newer release migrated; then the database is as it was at the backup,
    and the release that took it starts on it. A backup the previous release took has no
    version table of this release's: the restored database is the previous release's
    again, and this release migrates it once more (its migration applied, not skipped)."""
    postgres_server.reset()
    url = postgres_server.url
    dump_block, restore_block = page_blocks(
        "tests/e2e/test_upgrade.py::"
        "test_the_previous_releases_backup_restored_as_the_page_says_serves_both_releases"
    )
    libpq = url.replace("postgresql+psycopg://", "postgresql://")
    env = {**os.environ, "PATH": f"{postgres_server.bin}:{os.environ['PATH']}"}

    def run(block: list[str]) -> None:
        run_script([command.replace(PAGE_URL, libpq) for command in block], tmp_path, env)

    took_it = previous_release.python if backed_up_by == "previous" else sys.executable
    assert _offset_sidecar(took_it, "migrate", url, tmp_path).returncode == 0
    a_group_in(url)
    at_backup = contents(url)
    run(dump_block)
    if backed_up_by == "previous":
        assert _offset_sidecar(sys.executable, "migrate", url, tmp_path).returncode == 0
    else:
        as_a_newer_release_would(url)
        assert _offset_sidecar(sys.executable, "migrate", url, tmp_path).returncode == 1
    run(restore_block)
    assert contents(url) == at_backup
    done = _offset_sidecar(took_it, "migrate", url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert contents(url) == at_backup
    if backed_up_by == "previous":  # and this release again: its migration applied anew
        done = _offset_sidecar(sys.executable, "migrate", url, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        migrated = contents(url)
        assert migrated[migrate.VERSION_TABLE]["rows"] == [repr((migrate.HEAD,))]
        assert not [c for c in migrated["replicas"]["columns"] if c[0].startswith("watcher_")]
