"""What ``create_app`` is built from besides the settings: each part it would otherwise
build itself, and whether the service runs its watcher and writer as child processes.

Tests hand in doubles (``testing``); ``offset-sidecar serve`` hands in ``children=True``
and the process's heap keeper. A part left None is built from the settings: the SQL store
(``database.url``), aiokafka's committer, readers and record-time reader per Kafka cluster,
fsspec's checkpoint storage, the SQL store's followed folders and (with replicas) its
status board.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from spark_offset_sidecar.observe.metrics import HeapView
from spark_offset_sidecar.ports.checkpoints import CheckpointStorage, FollowedFolders
from spark_offset_sidecar.ports.kafka import (
    CommittedOffsetsReader,
    LogEndReader,
    OffsetCommitter,
    RecordTimeReader,
    StartingOffsetsReader,
)
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import LedgerStore


@dataclass(frozen=True)
class Parts:
    store: LedgerStore | None = None
    committer: OffsetCommitter | None = None
    log_ends: LogEndReader | None = None
    record_times: RecordTimeReader | None = None
    starting_offsets: StartingOffsetsReader | None = None
    committed_reader: CommittedOffsetsReader | None = None  # replicas: a takeover's check
    checkpoint_storage: CheckpointStorage | None = None
    followed_folders: FollowedFolders | None = None
    status_board: StatusBoard | None = None  # replicas: the reports every replica reads
    registry: CollectorRegistry | None = None
    clock: Callable[[], float] = time.time
    heap: HeapView | None = None  # the process's heap keeper: its pauses exported
    # The watcher and the writer as child processes (``Topology.resolve``): what serve runs.
    children: bool = False
