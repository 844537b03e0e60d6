"""What the service holds, reached by the HTTP layer through ``request.app.state.runtime``:
what the composition root (``app``) builds before starting (``Runtime``), and the parts
its lifespan started (``Running``), set once every one has started. Nothing here imports
the application, so routes and the app never import each other."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.http.auth import TokenRegistry
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.checkpoints import FollowedFolders
from spark_offset_sidecar.ports.group_reports import GroupReports
from spark_offset_sidecar.ports.kafka import StartingOffsetsReader
from spark_offset_sidecar.runtime.checkpoint_follower import CheckpointFollower
from spark_offset_sidecar.runtime.commit_loop import CommitLoop
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.runtime.lag_monitors import LagMonitors
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.turns import Pace


@dataclass(frozen=True)
class Running:
    """The parts the lifespan started, every one of them: routes that need one take this
    whole (``access.running_of``), never a part that may not be there yet."""

    durable: DurableLedger
    commit_loop: CommitLoop
    commit_task: asyncio.Task[None]
    lag_monitor: LagMonitor | LagMonitors  # LagMonitors: several clusters
    lag_task: asyncio.Task[None]
    # What every read answers groups' status and live commit state from: this process's
    # memory alone, the board of the owners with replicas (chosen once, at start).
    reports: GroupReports
    # The registry of followed folders and the loop that reads them; None: the store
    # keeps no followed folders (a store double without them), and none are read.
    followed: FollowedFolders | None
    follower: CheckpointFollower | None


@dataclass
class Runtime:
    """What the composition root built before starting, and what its lifespan started."""

    settings: Settings
    metrics: SidecarMetrics
    clock: Callable[[], float]
    starting_offsets: StartingOffsetsReader  # reads a group's commits from Kafka
    tokens: TokenRegistry | None = None
    # Why a folder path cannot be followed here (an unknown protocol, a missing extra).
    check_folder: Callable[[str], str | None] = lambda path: None
    # Why an identity does not work now (a Kafka token, Kafka refusing the credentials, the
    # jobs' token issuer): each says its problem, or None. Shown on /readyz and /ui.
    identity_problems: list[Callable[[], str | None]] = field(default_factory=list)
    # Set once every part has started, and kept until the process ends (events taken
    # while stopping are still recorded); ``ready`` is True only in between.
    running: Running | None = None
    ready: bool = False

    @cached_property
    def clusters(self) -> Clusters:
        """The Kafka clusters, and which one a group's events go to (R14)."""
        return self.settings.clusters.choice()

    @cached_property
    def pages(self) -> Pace:
        """Lets ``/ui``'s readers in at most ``status.ui_max_pages_per_second``: a page left
        reloading back to back would otherwise take the event loop from the jobs' events."""
        return Pace(self.settings.status.ui_max_pages_per_second)

    def problems(self) -> list[str]:
        return [problem for check in self.identity_problems if (problem := check())]

    def live_problem(self) -> str | None:
        if self.running is None:
            return "the commit loop has not started"
        task, loop = self.running.commit_task, self.running.commit_loop
        if task.done():
            return "the commit loop has stopped"
        stalled = time.monotonic() - loop.heartbeat
        if stalled > max(30.0, 10 * loop.tick):
            return f"the commit loop has not run for {stalled:.0f} s"
        return None
