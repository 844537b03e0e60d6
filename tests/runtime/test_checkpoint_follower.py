"""The follower on its ports (``testing`` doubles for the storage and the registry, the
real ledger): what it records, what a poll costs, and how it fails. The real storage
and real Spark are in ``tests/adapters/test_fsspec_storage.py`` and
``tests/e2e/test_checkpoint_follower.py``."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.ledger.changes import Outcome
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import CheckpointReadError, StoreUnavailable
from spark_offset_sidecar.ports.checkpoints import FollowedFolder
from spark_offset_sidecar.ports.store import InStoreThread
from spark_offset_sidecar.runtime.checkpoint_follower import CheckpointFollower
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.testing import (
    InMemoryCheckpointStorage,
    InMemoryFollowedFolders,
    InMemoryStore,
)
from tests.support.checkpoints import COMMIT_LOG, offset_log

PATH = "s3://bucket/orders"
GROUP = "orders-group"
QUERY = "5b028b11-7861-428b-8e06-2da270548ca8"
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def offsets_file(batch: int) -> str:
    return offset_log(
        f'{{"orders":{{"0":{10 * batch},"1":{5 * batch}}}}}', f'{{"logOffset":{batch}}}'
    )


class Folder:
    def __init__(self, storage: InMemoryCheckpointStorage, path: str = PATH) -> None:
        self.storage, self.path = storage, path

    def start(self, query: str = QUERY) -> None:
        self.storage.write(f"{self.path}/metadata", f'{{"id":"{query}"}}')

    def plan(self, batch: int, text: str | None = None) -> None:
        self.storage.write(f"{self.path}/offsets/{batch}", text or offsets_file(batch))

    def commit(self, batch: int, text: str = COMMIT_LOG) -> None:
        self.storage.write(f"{self.path}/commits/{batch}", text)

    def run(self, *batches: int) -> None:
        for batch in batches:
            self.plan(batch)
            self.commit(batch)


async def setup(
    *,
    relist_every: int = 60,
    topics: tuple[str, ...] | None = None,
    cluster: str | None = None,
    clusters: Clusters | None = None,
) -> tuple[CheckpointFollower, Folder, InMemoryStore]:
    storage, store = InMemoryCheckpointStorage(), InMemoryStore()
    thread = ThreadPoolExecutor(1)
    writer = InStoreThread(store, thread)
    durable = await DurableLedger.open(
        store, thread=thread, writer=writer, max_pending=100, backoff=Backoff(0.5, 10)
    )
    registry = InMemoryFollowedFolders(FollowedFolder(PATH, GROUP, topics, "ops", cluster))
    follower = CheckpointFollower(
        storage, registry, durable, interval=1.0, relist_every=relist_every, clusters=clusters
    )
    return follower, Folder(storage), store


def recorded(follower: CheckpointFollower) -> tuple[int | None, dict[TopicPartition, int]]:
    query = follower.durable.ledger.queries.get(QUERY)
    group = follower.durable.ledger.groups.get(GROUP)
    slot = group.slot.offsets if group and group.slot else {}
    return (query.last_completed_id if query else None), dict(slot)


def errors(follower: CheckpointFollower) -> dict[str, int]:
    return dict(follower.states[PATH].errors)


async def test_the_newest_completed_batch_is_recorded_with_its_offsets() -> None:
    follower, folder, _ = await setup()
    folder.start()
    folder.run(0, 1, 2)
    folder.plan(3)  # planned, not done
    await follower.poll_all()
    assert recorded(follower) == (2, {T0: 20, T1: 10})
    pending = follower.durable.ledger.queries[QUERY].pending
    assert list(pending) == [3]  # offsets/3: Flink's pendingOffsetsToCommit.put(3, ...)
    folder.commit(3)
    await follower.poll_all()
    assert recorded(follower) == (3, {T0: 30, T1: 15})
    assert errors(follower) == {}


async def test_a_quiet_poll_costs_one_request_and_new_batches_a_few() -> None:
    follower, folder, _ = await setup()
    folder.start()
    folder.run(*range(50))
    await follower.poll_all()  # the first poll lists
    storage = follower.storage
    for _ in range(3):
        before = storage.requests
        await follower.poll_all()
        assert storage.requests - before == 1  # offsets/50 (absent)
    folder.plan(50)
    await follower.poll_all()
    before = storage.requests
    await follower.poll_all()
    assert storage.requests - before == 1  # commits/50 (absent): the batch is running
    folder.commit(50)
    folder.run(*range(51, 1050))
    before = storage.requests
    await follower.poll_all()
    assert recorded(follower)[0] == 1049
    assert storage.requests - before <= 2 * 11 + 7  # gallop + bisect over 1,000 batches


async def test_a_batch_reported_by_a_listener_too_is_a_duplicate() -> None:
    follower, folder, _ = await setup()
    ledger = follower.durable.ledger
    listener = await follower.durable.record(
        lambda led: led.decide_progress(QUERY, GROUP, "run-1", 4, {T0: 40, T1: 20}, 1.0),
        query_id=QUERY,
        group_id=GROUP,
    )
    assert listener.outcome is Outcome.ACCEPTED
    folder.start()
    folder.run(3, 4)
    await follower.poll_all()
    assert recorded(follower) == (4, {T0: 40, T1: 20})
    assert ledger.groups[GROUP].counters.events[Outcome.DUPLICATE.value] == 2
    assert errors(follower) == {}
    folder.run(5)
    await follower.poll_all()
    stale = await follower.durable.record(  # the listener's event arrives late
        lambda led: led.decide_progress(QUERY, GROUP, "run-1", 5, {T0: 50, T1: 25}, 1.0),
        query_id=QUERY,
        group_id=GROUP,
    )
    assert stale.outcome is Outcome.DUPLICATE
    assert recorded(follower) == (5, {T0: 50, T1: 25})


async def test_half_written_or_garbage_files_complete_nothing_until_whole() -> None:
    follower, folder, _ = await setup()
    folder.start()
    folder.run(0)
    await follower.poll_all()
    folder.plan(1, offsets_file(1)[:-9])  # cut inside the file source's line
    folder.commit(1)
    await follower.poll_all()
    assert recorded(follower)[0] == 0
    assert errors(follower) == {"unreadable_file": 1}
    assert "offsets/1, line 4" in (follower.states[PATH].last_error or "")
    folder.plan(1)
    folder.commit(1, "v1\n")  # the commit half-written: batch 1 is not done
    await follower.poll_all()
    assert recorded(follower)[0] == 0
    assert errors(follower) == {"unreadable_file": 2}
    folder.commit(1)
    await follower.poll_all()
    assert recorded(follower) == (1, {T0: 10, T1: 5})
    assert follower.states[PATH].last_error is None


async def test_a_commit_without_its_offsets_is_refused() -> None:
    follower, folder, _ = await setup()
    folder.start()
    folder.commit(0)
    await follower.poll_all()
    assert recorded(follower)[0] is None
    assert errors(follower) == {"missing_file": 1}


async def test_a_folder_registered_before_its_job_waits_and_one_that_vanished_fails() -> None:
    follower, folder, _ = await setup(relist_every=3)
    await follower.poll_all()
    assert errors(follower) == {}
    assert "no checkpoint yet" in (follower.states[PATH].last_error or "")
    folder.start()
    folder.run(0)
    await follower.poll_all()
    assert recorded(follower)[0] == 0
    follower.storage.delete_folder(PATH)  # type: ignore[attr-defined]
    for _ in range(4):  # 3 probes see nothing new; the listing after them, no metadata
        await follower.poll_all()
    assert errors(follower) == {"missing_file": 1}


async def test_a_recreated_checkpoint_is_a_new_query_refused_until_the_old_is_released() -> None:
    follower, folder, _ = await setup()
    folder.start()
    folder.run(0, 1, 2)
    await follower.poll_all()
    follower.storage.delete_folder(PATH)  # type: ignore[attr-defined]
    folder.start("new-query")
    folder.run(0, 1, 2, 3)  # batch 3 is where the reader of the old query looks next
    await follower.poll_all()
    assert errors(follower) == {"conflict": 1}
    assert "belongs to query" in (follower.states[PATH].last_error or "")
    assert recorded(follower) == (2, {T0: 20, T1: 10})  # nothing moved, nothing misread
    released = await follower.durable.record(lambda led: led.decide_release(QUERY), query_id=QUERY)
    assert released.outcome is Outcome.ACCEPTED
    await follower.poll_all()
    query = follower.durable.ledger.queries["new-query"]
    assert query.last_completed_id == 3
    assert follower.durable.ledger.groups[GROUP].query_id == "new-query"


async def test_store_and_storage_outages_are_counted_and_retried() -> None:
    follower, folder, store = await setup()
    folder.start()
    folder.run(0)
    store.fail_with = StoreUnavailable("disk full")
    await follower.poll_all()
    assert recorded(follower)[0] is None
    follower.storage.fail_with = CheckpointReadError(PATH, "unreachable", "refused")  # type: ignore[attr-defined]
    await follower.poll_all()
    assert errors(follower) == {"store_unavailable": 1, "unreachable": 1}
    store.fail_with = None
    follower.storage.fail_with = None  # type: ignore[attr-defined]
    await follower.poll_all()
    assert recorded(follower) == (0, {T0: 0, T1: 0})


async def test_a_purge_past_the_reader_is_caught_by_the_next_listing() -> None:
    follower, folder, _ = await setup(relist_every=3)
    folder.start()
    folder.run(0, 1)
    await follower.poll_all()
    follower.storage.delete_folder(PATH)  # type: ignore[attr-defined]
    folder.start()
    folder.run(*range(200, 205))  # minBatchesToRetain passed batch 2 between two polls
    for _ in range(4):
        await follower.poll_all()
    assert recorded(follower)[0] == 204


async def test_topics_the_registering_token_may_not_commit_are_refused() -> None:
    follower, folder, _ = await setup(topics=("payments-*",))
    folder.start()
    folder.run(0)
    await follower.poll_all()
    assert recorded(follower)[0] is None
    assert errors(follower) == {"forbidden_topic": 1}


async def test_a_folder_of_a_group_another_replica_commits_is_not_read() -> None:
    follower, folder, _ = await setup()
    folder.start()
    folder.run(0)
    await follower.poll_all()
    follower.durable.ledger.commit_only(set())  # the group is another replica's now
    folder.run(1)
    before = follower.storage.requests
    await follower.poll_all()
    assert follower.storage.requests == before
    assert recorded(follower)[0] == 0


async def test_a_recreated_checkpoint_behind_the_reader_is_seen_at_the_next_listing() -> None:
    follower, folder, _ = await setup(relist_every=4)
    folder.start()
    folder.run(*range(10))
    await follower.poll_all()
    follower.storage.delete_folder(PATH)  # type: ignore[attr-defined]
    folder.start("new-query")
    folder.run(0, 1)
    for _ in range(5):  # 4 probes of offsets/10, then a listing
        await follower.poll_all()
    assert errors(follower) == {"conflict": 1}
    assert recorded(follower)[0] == 9


async def test_an_unexpected_error_is_counted_and_the_other_folders_still_read() -> None:
    follower, folder, _ = await setup()
    other = "/mnt/other"
    follower.folders.add(FollowedFolder(other, "other-group"))  # type: ignore[attr-defined]
    Folder(follower.storage, other).start("other-query")  # type: ignore[arg-type]
    Folder(follower.storage, other).run(0)  # type: ignore[arg-type]
    folder.start()
    folder.run(0)
    broken = follower.storage.read_text

    def read_text(path: str) -> str | None:
        if path.startswith(PATH):
            raise KeyError("a bug")
        return broken(path)

    follower.storage.read_text = read_text  # type: ignore[method-assign]
    await follower.poll_all()
    assert errors(follower) == {"internal_error": 1}
    assert follower.durable.ledger.queries["other-query"].last_completed_id == 0


async def test_a_read_that_never_returns_fails_its_poll_and_the_others_go_on() -> None:
    """A hung mount: the folder's read does not return. Its poll fails in the read
    timeout, the other folder is read every round, and the hung folder holds one thread
    at most (its next poll does not start another read)."""
    follower, folder, _ = await setup()
    # Both folders' reads are timed by it: the hung one's poll fails after it, and the
    # healthy one's read must end within it, on a slow machine too.
    follower.read_timeout = 2.0
    other = "/mnt/other"
    follower.folders.add(FollowedFolder(other, "other-group"))  # type: ignore[attr-defined]
    other_folder = Folder(follower.storage, other)  # type: ignore[arg-type]
    other_folder.start("other-query")
    folder.start()
    folder.run(0)
    hung, reads = threading.Event(), []
    read_text = follower.storage.read_text

    def hanging(path: str) -> str | None:
        if path.startswith(PATH):
            reads.append(path)
            hung.wait(300)  # until the test lets it go
        return read_text(path)

    follower.storage.read_text = hanging  # type: ignore[method-assign]
    try:
        seen = []
        for batch in range(3):
            other_folder.run(batch)
            await asyncio.wait_for(follower.poll_all(), 60)
            assert follower.durable.ledger.queries["other-query"].last_completed_id == batch
            seen.append(follower.states[PATH].last_error or "")
        assert errors(follower) == {"unreachable": 3}
        assert "no answer within 2 s" in seen[0]
        assert all("the read before has not returned" in error for error in seen[1:])
        assert len(reads) == 1, "one stuck read, not one a round"
    finally:
        hung.set()
    stuck = follower.states[PATH].reading
    assert stuck is not None
    await asyncio.wait_for(asyncio.wait({stuck}), 60)  # it returns; the next poll reads again
    await follower.poll_all()
    assert recorded(follower)[0] == 0


async def test_a_folder_commits_to_the_cluster_its_registration_named() -> None:
    clusters = Clusters("main", ("eu",), (("orders-*", "eu"),))
    follower, folder, _ = await setup(cluster="main", clusters=clusters)
    folder.start()
    folder.run(0, 1)
    await follower.poll_all()
    # Named: the default cluster, though the settings' pattern would choose eu.
    assert follower.durable.ledger.groups[GROUP].cluster is None
    follower, folder, _ = await setup(clusters=clusters)
    folder.start()
    folder.run(0, 1)
    await follower.poll_all()
    assert follower.durable.ledger.groups[GROUP].cluster == "eu"  # the pattern's choice
    # A cluster the settings dropped since the folder was registered: refused, by name.
    follower, folder, _ = await setup(cluster="us", clusters=clusters)
    folder.start()
    folder.run(0)
    await follower.poll_all()
    assert errors(follower) == {"refused": 1}
    assert "no Kafka cluster is named 'us'" in (follower.states[PATH].last_error or "")
    assert GROUP not in follower.durable.ledger.groups
