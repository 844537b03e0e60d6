"""What the running service holds: built by the composition root (``service.app``) and
reached by the HTTP layer through ``request.app.state.runtime``. Nothing here imports the
application, so routes and the app never import each other."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.auth import TokenRegistry
from service.commit_loop import CommitLoop
from service.durable_ledger import DurableLedger
from service.lag_monitor import LagMonitor
from service.metrics import SidecarMetrics
from service.ports import StartingOffsetsReader
from service.settings import Settings

if TYPE_CHECKING:  # replicas' modules need the postgres extra: imported when replicated
    from service.lease_keeper import LeaseKeeper


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
    lag_monitor: LagMonitor | None = None
    lag_task: asyncio.Task[None] | None = None
    lease_keeper: LeaseKeeper | None = None
    ready: bool = False

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
