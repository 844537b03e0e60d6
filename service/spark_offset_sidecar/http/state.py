"""What the service holds, reached by the HTTP layer through ``request.app.state.runtime``:
what the composition root (``app``) builds before starting (``Runtime``), and the parts
its lifespan started, set once every one has started (``Lifecycle``, the lifespan's state
alone): ``Running`` in the process that takes events, ``Watching`` in its watcher
(``app.watch``); both are ``Started``, which is what the readers' and operational routes
need. Nothing here imports the application, so routes and the app never import each
other."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.http.auth import TokenRegistry
from spark_offset_sidecar.observe.fleet_metrics import MetricsPage
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.checkpoints import FollowedFolders
from spark_offset_sidecar.ports.group_reports import GroupReports
from spark_offset_sidecar.ports.kafka import StartingOffsetsReader
from spark_offset_sidecar.runtime.store_follower import StoreFollower
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.topology import Topology
from spark_offset_sidecar.turns import Pace

if TYPE_CHECKING:  # the side taking events' parts: a watcher imports none of them
    from spark_offset_sidecar.runtime.checkpoint_follower import CheckpointFollower
    from spark_offset_sidecar.runtime.commit_loop import CommitLoop
    from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
    from spark_offset_sidecar.runtime.group_reports import JobsSeen


@dataclass(frozen=True)
class Running:
    """The parts the lifespan started, every one of them: routes that need one take this
    whole (``access.running_of``), never a part that may not be there yet."""

    durable: DurableLedger
    commit_loop: CommitLoop
    commit_task: asyncio.Task[None]
    jobs: JobsSeen  # the jobs' rates from their progress events (its watcher reads the log ends)
    # What every read answers groups' status and live commit state from: this process's
    # memory alone, the board of the owners with replicas (chosen once, at start).
    reports: GroupReports
    followed: FollowedFolders  # the registry of followed folders
    follower: CheckpointFollower  # the loop that reads them
    starting_offsets: StartingOffsetsReader  # reads a group's commits from Kafka
    page: MetricsPage  # what /metrics answers

    def live_problem(self) -> str | None:
        if self.commit_task.done():
            return "the commit loop has stopped"
        stalled = time.monotonic() - self.commit_loop.heartbeat
        if stalled > max(30.0, 10 * self.commit_loop.tick):
            return f"the commit loop has not run for {stalled:.0f} s"
        return None

    async def check_store(self) -> None:
        await self.durable.check_store()


@dataclass(frozen=True)
class Watching:
    """The parts a watcher's lifespan started: a ledger that follows the store, and the lag
    monitor that watches it."""

    follower: StoreFollower
    follow_task: asyncio.Task[None]
    lag_task: asyncio.Task[None]
    reports: GroupReports
    page: MetricsPage  # what /metrics answers, its own series; its service's share apart
    # The followed folders, listed from the store the service writes; how reading each
    # goes is what its service told it.
    followed: FollowedFolders

    def live_problem(self) -> str | None:
        for task, what in ((self.follow_task, "store follower"), (self.lag_task, "lag monitor")):
            if task.done():
                return f"the {what} has stopped"
        return None

    async def check_store(self) -> None:
        await asyncio.to_thread(self.follower.rows.check)


class Started(Protocol):
    """What a lifespan started, as the readers' and operational routes see it: groups'
    reports and the followed folders."""

    @property
    def reports(self) -> GroupReports: ...
    @property
    def followed(self) -> FollowedFolders: ...

    @property
    def page(self) -> MetricsPage: ...

    def live_problem(self) -> str | None:
        """Why the process should be restarted, or None."""

    async def check_store(self) -> None:
        """Raise ``StoreError`` unless the store answers."""


def any_folder(path: str) -> str | None:
    """Every folder path can be followed: what a checkpoint storage handed in says."""
    return None


@dataclass
class Lifecycle:
    """The lifespan's state, set by it alone: the parts it started, once every one has
    started, kept until the process ends (events taken while stopping are still recorded);
    ``ready`` is True only in between. ``running`` only in the process that takes events;
    ``started`` in every process."""

    running: Running | None = None
    started: Started | None = None
    ready: bool = False


@dataclass(frozen=True)
class Runtime:
    """What the composition root built before starting, complete once built, and the
    lifespan's state (``life``), the one part that changes."""

    settings: Settings
    metrics: SidecarMetrics
    clock: Callable[[], float]
    topology: Topology  # what runs where, resolved at start
    tokens: TokenRegistry | None = None
    # Why a folder path cannot be followed here (an unknown protocol, a missing extra).
    check_folder: Callable[[str], str | None] = any_folder
    # Why an identity does not work now (a Kafka token, Kafka refusing the credentials, the
    # jobs' token issuer): each says its problem, or None. Shown on /readyz and /ui.
    identity_problems: tuple[Callable[[], str | None], ...] = ()
    # The watcher: the identity problems its service told it (shown with its own).
    service_problems: Callable[[], Sequence[str]] = tuple
    life: Lifecycle = field(default_factory=Lifecycle)

    @property
    def running(self) -> Running | None:
        return self.life.running

    @property
    def started(self) -> Started | None:
        return self.life.started

    @property
    def ready(self) -> bool:
        return self.life.ready

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
        own = [problem for check in self.identity_problems if (problem := check())]
        return own + [problem for problem in self.service_problems() if problem not in own]

    def live_problem(self) -> str | None:
        if self.started is None:
            return "the service has not started"
        return self.started.live_problem()
