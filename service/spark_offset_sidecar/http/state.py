"""What the running service holds: built by the composition root (``app``) and
reached by the HTTP layer through ``request.app.state.runtime``. Nothing here imports the
application, so routes and the app never import each other."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.group_report import GroupReport
from spark_offset_sidecar.http.auth import TokenRegistry
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.checkpoints import FollowedFolders
from spark_offset_sidecar.ports.kafka import StartingOffsetsReader
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.runtime.checkpoint_follower import CheckpointFollower
from spark_offset_sidecar.runtime.commit_loop import CommitLoop
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.runtime.lag_monitors import LagMonitors
from spark_offset_sidecar.settings import Settings

if TYPE_CHECKING:  # replicas' modules need the postgres extra: imported when replicated
    from spark_offset_sidecar.runtime.lease_keeper import LeaseKeeper


@dataclass
class Runtime:
    """What the lifespan started; routes reach it through ``request.app.state.runtime``."""

    settings: Settings
    metrics: SidecarMetrics
    clock: Callable[[], float]
    starting_offsets: StartingOffsetsReader  # reads a group's commits from Kafka
    tokens: TokenRegistry | None = None
    durable: DurableLedger | None = None
    commit_loop: CommitLoop | None = None
    commit_task: asyncio.Task[None] | None = None
    lag_monitor: LagMonitor | LagMonitors | None = None  # LagMonitors: several clusters
    lag_task: asyncio.Task[None] | None = None
    lease_keeper: LeaseKeeper | None = None
    followed: FollowedFolders | None = None  # the registry of followed folders
    follower: CheckpointFollower | None = None
    # With replicas: what every replica answers status and live commit state from.
    board: StatusBoard | None = None
    # Why a folder path cannot be followed here (an unknown protocol, a missing extra).
    check_folder: Callable[[str], str | None] = lambda path: None
    # Why an identity does not work now (a Kafka token, Kafka refusing the credentials, the
    # jobs' token issuer): each says its problem, or None. Shown on /readyz and /ui.
    identity_problems: list[Callable[[], str | None]] = field(default_factory=list)
    ready: bool = False

    @cached_property
    def clusters(self) -> Clusters:
        """The Kafka clusters, and which one a group's events go to (R14)."""
        return self.settings.clusters()

    def problems(self) -> list[str]:
        return [problem for check in self.identity_problems if (problem := check())]

    async def published(self, group_ids: Collection[str] | None = None) -> list[GroupReport]:
        """With replicas, the reports of ``group_ids`` (None: every group) as their owners
        last published them, read in a worker thread (the board is a blocking database
        read; the event loop keeps serving)."""
        if self.board is None:
            raise RuntimeError("no status board: the service runs alone")
        if group_ids is not None and not group_ids:
            return []
        return await asyncio.to_thread(self.board.read, group_ids)

    def live_problem(self) -> str | None:
        task, loop = self.commit_task, self.commit_loop
        if task is None or loop is None:
            return "the commit loop has not started"
        if task.done():
            return "the commit loop has stopped"
        stalled = time.monotonic() - loop.heartbeat
        if stalled > max(30.0, 10 * loop.tick):
            return f"the commit loop has not run for {stalled:.0f} s"
        return None
