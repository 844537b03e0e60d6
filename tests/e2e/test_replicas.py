"""Several replicas on one real PostgreSQL and the real broker (issue 9): any replica
accepts any event, each group is committed by one replica at a time, a killed owner's
groups move within the lease, and the final offsets are exact and never went backwards."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.processes import children_running
from harness.replica_cluster import ReplicaCluster, overlapping_owners
from tests.support.checkpoints import write_batch
from tests.support.kafka import committed_offsets, unique_group
from tests.support.offset_watch import OffsetWatch
from tests.support.service import metric, metric_sum, settled_reads, spark_progress, wait_for

LEASE = 3.0
SETTINGS: dict[str, Any] = {
    "lease_seconds": LEASE,
    "commit_timeout_seconds": 1.0,
    "lag_read_interval_seconds": 60,
}
GROUPS = 9


def _offsets(topic: str, batch: int, index: int) -> dict[str, dict[str, int]]:
    return {topic: {str(p): 100 * batch + 10 * index + p for p in range(2)}}


def _expected(topic: str, batch: int, index: int) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): o for p, o in _offsets(topic, batch, index)[topic].items()}


def _wait_committed(
    bootstrap: str, topic: str, groups: list[str], last_batch: Callable[[str], int]
) -> None:
    """Until each group's committed offsets are exactly those of its last batch."""
    for index, group in enumerate(groups):
        wait_for(
            lambda g=group, i=index: (
                committed_offsets(bootstrap, g) == _expected(topic, last_batch(g), i)
            ),
            timeout=30,
            what=f"{group} at batch {last_batch(group)}",
        )


@pytest.fixture
def cluster(tmp_path: Path, kafka_bootstrap: str, postgres_server: Any) -> Any:
    postgres_server.reset()
    replicas = ReplicaCluster(tmp_path, kafka_bootstrap, postgres_server.url, 3, **SETTINGS)
    yield replicas.start()
    replicas.stop()


def test_three_replicas_share_events_and_groups_and_survive_a_killed_owner(
    cluster: ReplicaCluster, kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = new_topic(partitions=2)
    groups = [unique_group("rep") for _ in range(GROUPS)]
    queries = [f"q-{i}-{g}" for i, g in enumerate(groups)]
    names = list(cluster.replicas)
    posted = {g: -1 for g in groups}  # last batch accepted per group
    lock = threading.Lock()

    def post(batch: int, index: int, replica: str) -> None:
        group = groups[index]
        answer = cluster.replicas[replica].post_progress(
            group, spark_progress(batch, _offsets(topic, batch, index), query=queries[index])
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["outcome"] == "accepted", answer.text
        with lock:
            posted[group] = max(posted[group], batch)

    watches = [OffsetWatch(kafka_bootstrap, g, interval=0.1) for g in groups]
    for watch in watches:
        watch.__enter__()
    try:
        # Phase 1: every replica takes events of every group (batch b of group i goes to
        # replica (b + i) % 3), groups at once: batches and commits of different groups
        # meet in every replica's transactions (and must never deadlock: all 200).
        def one_group(index: int) -> None:
            for batch in range(6):
                post(batch, index, names[(batch + index) % 3])

        with ThreadPoolExecutor(GROUPS) as pool:
            list(pool.map(one_group, range(GROUPS)))
        _wait_committed(kafka_bootstrap, topic, groups, lambda _group: 5)

        def accepted_by_each() -> dict[str, float]:
            return {
                name: metric_sum(
                    r.http.get("/metrics").text, "sidecar_events_total", outcome="accepted"
                )
                for name, r in cluster.replicas.items()
            }

        # Each replica's events, every group's, exported by its watcher once told (a second).
        accepted = wait_for(
            lambda: (a := accepted_by_each()) and all(a.values()) and a,
            20,
            "each replica's accepted events counted",
        )

        # L4: the groups spread evenly. A snapshot may catch a group between its release
        # by a replica above its share and its claim by one below (a round later).
        def owned() -> dict[str, float | None]:
            return {
                name: metric(r.http.get("/metrics").text, "sidecar_groups_owned")
                for name, r in cluster.replicas.items()
            }

        wait_for(
            lambda: owned() == {name: 3.0 for name in names},
            2 * LEASE,
            "three groups owned by each replica",
        )
        committers = {c.replica for c in cluster.commits()}
        assert committers == set(names), committers
        # Every replica shows every query as stored, and the same status of each group
        # (test_every_replica_answers_every_read_alike... reads it often). The lag is read
        # once a minute here, but a replica's watcher also reads, and publishes, the groups
        # its replica has just taken: the status reads are taken while nothing was
        # published (``settled_reads``).
        for index, group in enumerate(groups):
            for replica in cluster.replicas.values():
                view = replica.query(queries[index])
                assert (view["group_id"], view["last_completed_checkpoint"]) == (group, 5)
                assert view["committed"]["checkpoint_id"] == 5, view
            answers = settled_reads(
                {
                    name: lambda r=r, g=group: _status_answer(r, g)
                    for name, r in cluster.replicas.items()
                },
                20,
                f"{group}'s status",
            )
            assert len(set(answers.values())) == 1, answers

        # Phase 2: kill the owner of the busiest groups while events keep coming to the
        # two others; its groups move and reach the newest offsets.
        victim = names[0]
        victim_groups = {c.group_id for c in cluster.commits() if c.replica == victim}
        survivors = [n for n in names if n != victim]
        stop = threading.Event()

        def keep_posting() -> None:
            for batch in itertools.count(6):
                if stop.is_set():
                    return
                for index in range(GROUPS):
                    post(batch, index, survivors[(batch + index) % 2])
                time.sleep(0.05)

        poster = threading.Thread(target=keep_posting)
        poster.start()
        time.sleep(1.0)
        killed_at = time.time()
        cluster.kill(victim)
        moved_after: dict[str, float] = {}
        deadline = time.monotonic() + 4 * LEASE + 10
        while len(moved_after) < len(victim_groups) and time.monotonic() < deadline:
            for commit in cluster.commits():
                if (
                    commit.group_id in victim_groups
                    and commit.replica != victim
                    and commit.started_at > killed_at
                ):
                    moved_after.setdefault(commit.group_id, commit.ended_at - killed_at)
            time.sleep(0.1)
        time.sleep(1.0)
        stop.set()
        poster.join(30)
        assert set(moved_after) == victim_groups, (victim_groups, moved_after)
        # Renewals every LEASE / 6, one commit timeout; slack for a shared machine.
        assert max(moved_after.values()) < LEASE + LEASE / 6 + 1.0 + 5.0, moved_after
        print(f"failover: {sorted(round(v, 2) for v in moved_after.values())} s")

        _wait_committed(kafka_bootstrap, topic, groups, posted.__getitem__)
    finally:
        for watch in watches:
            watch.__exit__(None, None, None)
    assert all(value and value > 0 for value in accepted.values()), accepted
    assert [w.regressions for w in watches] == [[] for _ in watches]
    assert overlapping_owners(cluster.commits()) == []
    for commit_list in _by_group(cluster.commits()).values():
        ids = [c.checkpoint_id for c in commit_list]
        assert ids == sorted(ids), ids


def _status_answer(replica: Any, group: str) -> tuple[int, str]:
    answer = replica.http.get(f"/v1/status/{group}")
    return answer.status_code, answer.text


READS_ALIKE = ("/v1/status", "/v1/queries", "/ui")
_CLOCK_WORDS = re.compile(r"\d+ (s|min|h|d) ago|as of\s+[\d: -]+UTC")


def _reads(replica: Any, groups: list[str], queries: list[str]) -> dict[str, Any]:
    """Every read route's answer from one replica, the page without its clock words: "as
    of" and "N s ago" are the reading replica's own time."""
    answers: dict[str, Any] = {}
    for path in (
        *READS_ALIKE,
        *(f"/v1/status/{g}" for g in groups),
        *(f"/v1/queries/{q}" for q in queries),
    ):
        answer = replica.http.get(path)
        assert answer.status_code == 200, (path, answer.text)
        if path == "/ui":
            answers[path] = _CLOCK_WORDS.sub("", answer.text)
        else:
            answers[path] = answer.json()
    return answers


def test_every_replica_answers_every_read_alike_and_windows_survive_a_killed_owner(
    tmp_path: Path, kafka_bootstrap: str, postgres_server: Any, new_topic: Any
) -> None:
    """Behind one Service, the same answer whichever replica takes a read (status, one
    group's status, queries, one query, the page), and a group's status window carries
    over to its new owner when the old one is SIGKILLed; each replica's watcher, its
    child, evaluates and publishes the groups its replica holds the leases of."""
    postgres_server.reset()
    cluster = ReplicaCluster(
        tmp_path,
        kafka_bootstrap,
        postgres_server.url,
        3,
        **{**SETTINGS, "lag_read_interval_seconds": 0.3},
    ).start()
    try:
        for replica in cluster.alive().values():
            assert len(children_running(replica.process.pid, "watcher")) == 1
            assert replica.http.get("/v1/service").json()["watcher"] == "child"
        topic = new_topic(partitions=2)
        groups = [unique_group("alike") for _ in range(6)]
        queries = [f"q-{g}" for g in groups]
        names = list(cluster.replicas)

        def post_batch(batch: int, replicas: list[str]) -> None:
            for index, group in enumerate(groups):
                replica = cluster.replicas[replicas[(batch + index) % len(replicas)]]
                answer = replica.post_progress(
                    group,
                    spark_progress(batch, _offsets(topic, batch, index), query=queries[index]),
                )
                assert answer.json()["outcome"] == "accepted", answer.text

        def status() -> dict[str, Any]:
            answer = next(iter(cluster.alive().values())).http.get("/v1/status")
            return {g["group"]: g for g in answer.json()["groups"]}

        def samples(group: dict[str, Any]) -> int:
            return min(
                (p["samples"] for p in group["partitions"]), default=0
            )  # none: not committed yet

        # Each batch is committed and sampled (a lag read every 0.3 s) before the next.
        for batch in range(5):
            post_batch(batch, names)
            _wait_committed(kafka_bootstrap, topic, groups, lambda _g, b=batch: b)
            wait_for(
                lambda b=batch: (
                    len(found := status()) == len(groups)
                    and all(samples(found[g]) >= b + 1 for g in groups)
                ),
                30,
                f"batch {batch} sampled in every group's window",
            )

        def every_replicas_reads() -> dict[str, dict[str, Any]]:
            """Every replica's reads, all taken while nothing was published."""
            return settled_reads(
                {
                    name: lambda r=r: _reads(r, groups, queries)
                    for name, r in cluster.alive().items()
                },
                60,  # 45 reads a round, on a machine that may be busy
                "the reports",
            )

        reads = every_replicas_reads()
        reference = reads[names[0]]
        for name in names[1:]:
            assert reads[name] == reference, f"{name} answers otherwise than {names[0]}"
        before = {g: samples(s) for g, s in status().items()}
        assert all(count >= 5 for count in before.values()), before
        reporters = {g["reported_by"] for g in reference["/v1/status"]["groups"]}
        assert len(reporters) == 3, reporters  # each replica owns and reports some groups

        def exported_once() -> bool:
            """Each group's status series on exactly one replica's /metrics (its owner's)."""
            texts = [r.metrics() for r in cluster.alive().values()]
            return all(
                sum(f'sidecar_consumergroup_status{{consumergroup="{g}",' in t for t in texts) == 1
                for g in groups
            )

        wait_for(exported_once, 20, "each group's series exported by one replica")

        # SIGKILL the owner of some groups: they move, and their windows with them.
        victim = names[0]
        victim_pid = cluster.replicas[victim].process.pid  # type: ignore[union-attr]
        victim_groups = {
            g["group"]
            for g in reference["/v1/status"]["groups"]
            if f"-{victim_pid}-" in g["reported_by"]
        }
        assert victim_groups, reference["/v1/status"]["groups"]
        cluster.kill(victim)
        moved = wait_for(
            lambda: (
                found
                if all(
                    f"-{victim_pid}-" not in (found := status())[g]["reported_by"] for g in groups
                )
                else None
            ),
            4 * LEASE + 20,
            "the victim's groups reported by their new owners",
        )
        after = {g: samples(moved[g]) for g in victim_groups}
        assert all(after[g] >= before[g] for g in victim_groups), (before, after)

        # The new owners go on sampling into the windows they were handed.
        survivors = [n for n in names if n != victim]
        post_batch(5, survivors)
        _wait_committed(kafka_bootstrap, topic, groups, lambda _g: 5)
        wait_for(
            lambda: all(samples(status()[g]) >= min(before[g] + 1, 10) for g in victim_groups),
            30,
            "batch 5 sampled in the handed-over windows",
        )
        reads = every_replicas_reads()
        assert reads[survivors[0]] == reads[survivors[1]]
        print(f"windows before/after the kill: {before} / {after}")
    finally:
        cluster.stop()


def _by_group(commits: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for commit in commits:
        out.setdefault(commit.group_id, []).append(commit)
    return out


def test_many_groups_at_once_on_three_replicas_never_deadlock(
    cluster: ReplicaCluster, kafka_bootstrap: str, new_topic: Any
) -> None:
    """Batches of events and of commit results on every replica touch the same groups'
    rows at once: all answered 200 (a deadlock would be a 503), all committed exactly."""
    topic = new_topic(partitions=2)
    groups = [unique_group("busy") for _ in range(60)]
    names = list(cluster.replicas)

    def one_group(index: int) -> None:
        for batch in range(15):
            replica = cluster.replicas[names[(batch + index) % 3]]
            answer = replica.post_progress(
                groups[index],
                spark_progress(batch, _offsets(topic, batch, index), query=f"q-{groups[index]}"),
            )
            assert (answer.status_code, answer.json()["outcome"]) == (200, "accepted"), answer.text

    with ThreadPoolExecutor(30) as pool:
        list(pool.map(one_group, range(len(groups))))
    _wait_committed(kafka_bootstrap, topic, groups, lambda _group: 14)
    assert overlapping_owners(cluster.commits()) == []


def test_each_followed_folder_is_read_by_its_groups_owner_and_moves_with_it(
    tmp_path: Path, kafka_bootstrap: str, postgres_server: Any, new_topic: Any
) -> None:
    postgres_server.reset()
    cluster = ReplicaCluster(
        tmp_path / "replicas",
        kafka_bootstrap,
        postgres_server.url,
        2,
        follow_interval_seconds=0.3,
        **{**SETTINGS, "lag_read_interval_seconds": 1.0},
    ).start()
    try:
        topic = new_topic(partitions=2)
        folders = {unique_group("fol"): tmp_path / f"ckpt-{i}" for i in range(4)}
        for index, (group, folder) in enumerate(folders.items()):
            write_batch(folder, f"q-{group}", 0, json.dumps(_offsets(topic, 0, index)))
            registered = cluster.replicas["r0"].http.post(  # all through one replica
                "/v1/followed-folders", json={"path": str(folder), "group_id": group}
            )
            assert registered.status_code == 201, registered.text
        for index, group in enumerate(folders):
            wait_for(
                lambda g=group, i=index: (
                    committed_offsets(kafka_bootstrap, g) == _expected(topic, 0, i)
                ),
                30,
                f"{group} committed",
            )

        def readers() -> dict[str, set[str]]:
            """Per replica, the folders it polled in the last second."""
            before = {n: r.metrics() for n, r in cluster.alive().items()}
            time.sleep(1.0)
            found: dict[str, set[str]] = {}
            for name, replica in cluster.alive().items():
                after = replica.metrics()
                found[name] = {
                    str(f)
                    for f in folders.values()
                    if (metric(after, "sidecar_followed_folder_polls_total", folder=str(f)) or 0)
                    > (
                        metric(before[name], "sidecar_followed_folder_polls_total", folder=str(f))
                        or 0
                    )
                }
            return found

        def one_reader_each() -> dict[str, set[str]] | None:
            """The readers, once every folder has exactly one (the groups may still be
            moving to their fair share between the replicas: each move hands a folder
            over, and a sample can see both sides of a hand-over)."""
            polled = readers()
            every = set().union(*polled.values()) == {str(f) for f in folders.values()}
            return polled if every and not set.intersection(*polled.values()) else None

        polled = wait_for(one_reader_each, 30, "each folder read by one replica")

        def listed_alike() -> list[dict[str, Any]] | None:
            """What every replica lists, if they list the same (and every folder read):
            owners publish how reading goes after each lag read, a round of reads may
            straddle one publication."""
            lists = [r.http.get("/v1/followed-folders").json() for r in cluster.alive().values()]
            same = all(listed == lists[0] for listed in lists)
            return lists[0] if same and all(f["reading"] for f in lists[0]) else None

        listed = wait_for(listed_alike, 30, "every replica listing the folders alike")
        pids = {n: r.process.pid for n, r in cluster.replicas.items()}  # type: ignore[union-attr]
        readers_listed = {
            name: {f["path"] for f in listed if f"-{pids[name]}-" in f["read_by"]} for name in pids
        }
        assert readers_listed == polled, (readers_listed, polled)
        assert all(f["last_batch_recorded"] == 0 for f in listed), listed

        victim = next(name for name, read in polled.items() if read)
        cluster.kill(victim)
        for index, (group, folder) in enumerate(folders.items()):
            write_batch(folder, f"q-{group}", 1, json.dumps(_offsets(topic, 1, index)))
        for index, group in enumerate(folders):  # the survivor took the groups and folders
            wait_for(
                lambda g=group, i=index: (
                    committed_offsets(kafka_bootstrap, g) == _expected(topic, 1, i)
                ),
                30,
                f"{group} committed after the owner died",
            )
        listed = wait_for(
            lambda: (
                found
                if (found := listed_alike())
                and all(f"-{pids[victim]}-" not in f["read_by"] for f in found)
                and all(f["last_batch_recorded"] == 1 for f in found)
                else None
            ),
            30,
            "the survivor listed as the reader of every folder",
        )
    finally:
        cluster.stop()
