"""In-memory doubles of the service's ports, for tests of the pure core and of the HTTP
layer (``create_app(settings, Parts(MemoryKafka(...), MemoryDatabase(...), metrics))``). None of
them is evidence that the system works with Kafka or a database: the real adapters are
tested against a real broker and real databases.

- ``InMemoryStore``      a ``LedgerStore`` (``ports.store``) that keeps nothing
- ``InMemoryCommitter``  an ``OffsetCommitter`` (``ports.kafka``) that records commits, and
                         the ``CommittedOffsetsReader`` of what it (or the test) committed
- ``InMemoryLogEnds``    a ``LogEndReader`` (``ports.kafka``) with log ends set by the test
- ``InMemoryCheckpointStorage``  a ``CheckpointStorage`` (``ports.checkpoints``): files in
                         a dict, written by the test; counts requests like the real one
- ``InMemoryFollowedFolders``    a ``FollowedFolders`` (``ports.checkpoints``)
- ``InMemoryStatusBoard``        a ``StatusBoard`` (``ports.status_board``) shared by the
                         tests' replicas; ``owners`` says who may publish which group
- ``InMemoryWatcher``    a ``WatcherLink`` (``ports.watcher``) that keeps what it is told;
                         ``started_again`` makes it a new watcher, ``down`` one that
                         does not answer
- ``MemoryKafka``       the Kafka clients (``ports.kafka.KafkaCommitting``) of one
                         cluster: the doubles above, given or new
- ``MemoryDatabase``    the ledger's database (``ports.database``): a store double and
                         its followed folders
- ``StaticVerifier``     a ``TokenVerifier`` (``ports.identity``): the identities of
                         tokens the test names; any other JWT-looking token is refused
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from spark_offset_sidecar.core.lag.report import GroupReport
from spark_offset_sidecar.core.lag.status import StoredWindow
from spark_offset_sidecar.core.ledger.changes import Change, CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.core.spark.checkpoint_log import batch_id_of
from spark_offset_sidecar.errors import (
    CommitError,
    ConfigError,
    KafkaReadError,
    Unauthenticated,
    WatcherUnavailable,
)
from spark_offset_sidecar.ports.checkpoints import FollowedFolder, FollowedFolders
from spark_offset_sidecar.ports.database import Opened, Replicas
from spark_offset_sidecar.ports.identity import VerifiedIdentity
from spark_offset_sidecar.ports.kafka import (
    Cluster,
    Committed,
    CommittedOffsetsReader,
    GroupCluster,
    LogEndReader,
    LogEnds,
    OffsetCommitter,
    Problem,
    RecordTimeReader,
    StartingOffsets,
    StartingOffsetsReader,
)
from spark_offset_sidecar.ports.status_board import BoardEntry
from spark_offset_sidecar.ports.store import InStoreThread, LedgerStore, StoredState
from spark_offset_sidecar.ports.watcher import Answer, MemoryUpdate


class InMemoryStore:
    """Records what it was given; survives nothing. For tests of the pure core."""

    def __init__(self) -> None:
        self.persisted: list[Change] = []
        self.fail_with: Exception | None = None

    def load(self) -> StoredState:
        return StoredState()

    def persist(self, changes: Sequence[Change]) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.persisted.extend(changes)

    def check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def close(self) -> None:
        pass


class InMemoryCommitter:
    """Records commits; can be told to fail or to hold commits until released."""

    def __init__(self) -> None:
        self.commits: list[CommitRequest] = []
        self.fail_with: CommitError | None = None
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.waits: dict[str, str] = {}  # what ``waiting`` says of a group (tests set it)

    def waiting(self, group_id: str) -> str | None:
        return self.waits.get(group_id)

    async def commit(self, request: CommitRequest) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self.fail_with is not None:
                raise self.fail_with
            self.commits.append(request)
        finally:
            self.in_flight -= 1

    async def committed(self, group_id: str) -> dict[TopicPartition, Committed]:
        """What Kafka would hold for ``group_id``: the recorded commits, the last one per
        partition winning (a test may append a late one)."""
        held: dict[TopicPartition, Committed] = {}
        for request in self.commits:
            if request.group_id == group_id:
                held.update({tp: Committed(o, "") for tp, o in request.offsets.items()})
        return held

    async def close(self) -> None:
        self.gate.set()


@dataclass
class InMemoryLogEnds:
    """Log ends (and starts: 0 unless set) set by the test; ``fail_with`` makes every read
    fail."""

    ends: dict[TopicPartition, int] = field(default_factory=dict)
    fail_with: KafkaReadError | None = None
    reads: int = 0
    starts: dict[TopicPartition, int] = field(default_factory=dict)

    async def log_ends(self, partitions: Collection[TopicPartition]) -> LogEnds:
        self.reads += 1
        if self.fail_with is not None:
            raise self.fail_with
        known = {tp: self.ends[tp] for tp in partitions if tp in self.ends}
        missing = sorted({tp.topic for tp in partitions if tp not in self.ends})
        return LogEnds(known, tuple(missing), {tp: self.starts.get(tp, 0) for tp in known})

    async def close(self) -> None:
        return None


@dataclass
class InMemoryRecordTimes:
    """Record timestamps set by the test, by (partition, offset): a read answers the first
    record at or after each offset; ``fail_with`` makes every read fail. ``asked`` lists
    every read's offsets."""

    times: dict[TopicPartition, dict[int, float]] = field(default_factory=dict)
    fail_with: KafkaReadError | None = None
    asked: list[dict[TopicPartition, int]] = field(default_factory=list)

    def stamp(self, tp: TopicPartition, offset: int, at: float) -> None:
        self.times.setdefault(tp, {})[offset] = at

    async def record_times(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, float | None]:
        self.asked.append(dict(offsets))
        if self.fail_with is not None:
            raise self.fail_with
        found: dict[TopicPartition, float | None] = {}
        for tp, offset in offsets.items():
            stamps = self.times.get(tp, {})
            after = [o for o in stamps if o >= offset]
            found[tp] = stamps[min(after)] if after else None
        return found

    async def close(self) -> None:
        return None


class InMemoryCheckpointStorage:
    """Checkpoint files in a dict (path -> text). ``fail_with``: raised by every call
    (a ``CheckpointReadError`` plays an unreachable store)."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.requests = 0
        self.fail_with: Exception | None = None

    def write(self, path: str, text: str) -> None:
        self.files[path] = text

    def delete_folder(self, path: str) -> None:
        for name in [p for p in self.files if p.startswith(path + "/")]:
            del self.files[name]

    def read_text(self, path: str) -> str | None:
        self._call()
        return self.files.get(path)

    def exists(self, path: str) -> bool:
        self._call()
        return path in self.files

    def batch_ids(self, directory: str) -> list[int]:
        self._call()
        prefix = directory.rstrip("/") + "/"
        names = (p[len(prefix) :] for p in self.files if p.startswith(prefix))
        found = (batch_id_of(name) for name in names if "/" not in name)
        return [batch for batch in found if batch is not None]

    def _call(self) -> None:
        self.requests += 1
        if self.fail_with is not None:
            raise self.fail_with


class InMemoryFollowedFolders:
    def __init__(self, *folders: FollowedFolder) -> None:
        self.folders = {f.path: f for f in folders}

    def list(self) -> Sequence[FollowedFolder]:
        return list(self.folders.values())

    def add(self, folder: FollowedFolder) -> FollowedFolder | None:
        existing = self.folders.get(folder.path)
        if existing is None:
            self.folders[folder.path] = folder
        return existing

    def remove(self, path: str) -> bool:
        return self.folders.pop(path, None) is not None


@dataclass
class _Board:
    entries: dict[str, BoardEntry] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)  # group -> replica that may publish
    fail_with: Exception | None = None


class InMemoryStatusBoard:
    """One replica's view of a board that several may share (``share``)."""

    def __init__(self, replica_id: str, board: _Board | None = None) -> None:
        self.replica_id = replica_id
        self._board = board or _Board()
        self.published = 0  # entries written

    def share(self, replica_id: str) -> InMemoryStatusBoard:
        """The same board, seen by another replica."""
        return InMemoryStatusBoard(replica_id, self._board)

    @property
    def owners(self) -> dict[str, str]:
        return self._board.owners

    def fail(self, exc: Exception | None) -> None:
        """Every call raises ``exc`` from now on (None: works again)."""
        self._board.fail_with = exc

    def publish(self, entries: Sequence[BoardEntry]) -> int:
        self._raise()
        written = 0
        for entry in entries:
            group_id = entry.report.status.group_id
            if self._board.owners.get(group_id, self.replica_id) == self.replica_id:
                self._board.entries[group_id] = entry
                written += 1
        self.published += written
        return written

    def read(self, group_ids: Collection[str] | None = None) -> list[GroupReport]:
        self._raise()
        return [
            entry.report
            for group_id, entry in sorted(self._board.entries.items())
            if group_ids is None or group_id in group_ids
        ]

    def windows(self, group_ids: Collection[str]) -> dict[str, StoredWindow]:
        self._raise()
        wanted = set(group_ids)
        return {g: entry.window for g, entry in self._board.entries.items() if g in wanted}

    def _raise(self) -> None:
        if self._board.fail_with is not None:
            raise self._board.fail_with


class StaticVerifier:
    """Knows the identities of the tokens it was given (``token -> identity``); a token
    starting ``eyJ`` that it does not know is refused, anything else is not its own."""

    def __init__(self, identities: Mapping[str, VerifiedIdentity]) -> None:
        self.identities = dict(identities)
        self.problem: str | None = None

    def looks_like_its_token(self, token: str) -> bool:
        return token in self.identities or token.startswith("eyJ")

    async def verify(self, token: str) -> VerifiedIdentity:
        if token not in self.identities:
            raise Unauthenticated("the token's signature does not verify")
        return self.identities[token]

    async def refresh(self) -> None:
        pass


class InMemoryWatcher:
    """A watcher reached in memory: ``updates`` lists the messages it took (since it was last
    started again); it answers no reader."""

    def __init__(self) -> None:
        self.updates: list[MemoryUpdate] = []
        self.generation = 1
        self.down = False

    @property
    def problem(self) -> str | None:
        return "down" if self.down else None

    def started_again(self) -> None:
        self.generation += 1
        self.updates.clear()

    async def get(self, path: str, query: str, headers: Mapping[str, str]) -> Answer:
        raise WatcherUnavailable("an in-memory watcher answers no reader")

    async def share(self) -> bytes:
        return b""

    async def tell(self, update: MemoryUpdate) -> None:
        if self.down:
            raise WatcherUnavailable("down")
        self.updates.append(update)


class MemoryKafka:
    """One cluster's clients: ``committer``, ``log_ends``, ``record_times`` (none: times not
    read), ``committed`` (what a takeover reads back; none: nothing) as given; no starting
    offsets are found."""

    def __init__(
        self,
        committer: OffsetCommitter | None = None,
        log_ends: LogEndReader | None = None,
        record_times: RecordTimeReader | None = None,
        committed: CommittedOffsetsReader | None = None,
    ) -> None:
        self.commits = committer or InMemoryCommitter()
        self.ends = log_ends or InMemoryLogEnds()
        self.times: dict[Cluster, RecordTimeReader] = {}
        if record_times is not None:
            self.times[None] = record_times
        self.committed = committed

    def log_ends(self) -> dict[Cluster, LogEndReader]:
        return {None: self.ends}

    def record_times(self) -> dict[Cluster, RecordTimeReader]:
        return dict(self.times)

    def resent(self) -> dict[Cluster, Callable[[], int]]:
        return {}

    def token_problems(self) -> list[Problem]:
        return []

    committer_problems = token_problems

    def committer(self, replica_id: str | None) -> OffsetCommitter:
        return self.commits

    def starting_offsets(self, group_cluster: GroupCluster) -> StartingOffsetsReader:
        return self._starting_offsets

    async def _starting_offsets(self, group_id: str, topics: Sequence[str]) -> StartingOffsets:
        raise KafkaReadError("an in-memory Kafka holds no starting offsets")

    def committed_reader(self, group_cluster: GroupCluster) -> CommittedOffsetsReader | None:
        return self.committed


@dataclass
class MemoryDatabase:
    """A store double and its followed folders, its batches written by the store in its
    thread; never shared by replicas."""

    store: LedgerStore = field(default_factory=InMemoryStore)
    followed: FollowedFolders = field(default_factory=InMemoryFollowedFolders)
    url: None = None

    async def open(self, stack: AsyncExitStack, thread: Executor) -> Opened:
        return Opened(self.store, InStoreThread(self.store, thread), self.followed)

    async def open_shared(
        self, stack: AsyncExitStack, thread: Executor, replica_id: str
    ) -> tuple[Opened, Replicas]:
        raise ConfigError("SIDECAR_REPLICATED", "a store double is never shared by replicas")
