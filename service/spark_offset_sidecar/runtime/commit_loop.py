"""The background committer: hands each group's slot to the ``OffsetCommitter``.

Invariants
  - At most one commit per group in flight; at most ``max_concurrent`` at once.
  - A failure is retried after the ledger's backoff even if no new event arrives.
  - ``heartbeat`` (read by ``/livez``) advances at least every ``tick`` while healthy.
  - With replicas, a group is taken only under an owner epoch that ``ownership`` grants
    now (leases L2, L3).
  - ``stop`` takes no new slots, lets commits in flight finish within the grace time and
    cancels the rest: their offsets stay in the slot, committed on the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from spark_offset_sidecar.core.ledger.changes import CommitRequest
from spark_offset_sidecar.core.ledger.leases import Ownership
from spark_offset_sidecar.core.offsets import describe
from spark_offset_sidecar.errors import INTERNAL_FAILURE, CommitError
from spark_offset_sidecar.observe.logs import about
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.kafka import OffsetCommitter
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger

log = logging.getLogger(__name__)


class CommitLoop:
    def __init__(
        self,
        durable: DurableLedger,
        committer: OffsetCommitter,
        metrics: SidecarMetrics,
        *,
        clock: Callable[[], float] = time.time,
        max_concurrent: int = 64,
        tick: float = 1.0,
        ownership: Ownership | None = None,
        wake: asyncio.Event | None = None,  # shared with what frees groups (a batch written)
    ) -> None:
        self.durable = durable
        self.committer = committer
        self.metrics = metrics
        self.clock = clock
        self.max_concurrent = max_concurrent
        self.tick = tick
        self.ownership = ownership
        self.cancelled = 0  # commits cut off by ``stop``: they may still reach Kafka
        self.heartbeat = time.monotonic()
        self._wake = wake if wake is not None else asyncio.Event()
        self._stopping = False
        self._commits: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        """Something may be ready to commit (an event was accepted)."""
        self._wake.set()

    async def run(self) -> None:
        while not self._stopping:
            self.heartbeat = time.monotonic()
            now = self.clock()
            for group_id in self._ready(now, self.max_concurrent - len(self._commits)):
                if len(self._commits) >= self.max_concurrent:
                    break
                self._start(group_id, now)
            await self._sleep(now)

    def _start(self, group_id: str, now: float, *, flush: bool = False) -> None:
        """Take ``group_id``'s slot, if it may be taken, and commit it in a task of its own."""
        fence = None
        if self.ownership is not None:
            fence = self.ownership.epoch_for_commit(group_id, time.monotonic())
            if fence is None:
                return
        request = self.durable.start_commit(group_id, now, fence, flush=flush)
        if request is not None:
            task = asyncio.create_task(self._commit(request), name=f"commit {group_id}")
            self._commits.add(task)
            task.add_done_callback(self._commits.discard)

    def _flush(self) -> None:
        """At shutdown, commit what waits only for its commit interval (ledger R13): the
        newest offsets reach Kafka now, not after the restart."""
        if not self._leased():
            return
        now = self.clock()
        for group_id in self.durable.ledger.waiting_for_interval(now):
            self._start(group_id, now, flush=True)

    def _leased(self) -> bool:
        """False while ``ownership`` lets nothing be committed (L3: lease not renewed)."""
        return self.ownership is None or self.ownership.leased(time.monotonic())

    def _ready(self, now: float, limit: int) -> list[str]:
        return self.durable.ledger.ready_groups(now, limit) if self._leased() else []

    async def _sleep(self, now: float) -> None:
        delay = self.tick
        retry_at = self.durable.ledger.next_retry_at() if self._leased() else None
        if retry_at is not None and len(self._commits) < self.max_concurrent:
            delay = min(delay, max(0.0, retry_at - now))
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    async def _commit(self, request: CommitRequest) -> None:
        started = time.monotonic()
        failure: str | None = None
        context = about(
            query_id=request.query_id,
            group_id=request.group_id,
            checkpoint_id=request.checkpoint_id,
            attempt=request.attempt,
            replica_id=self.ownership.replica_id if self.ownership else None,
            owner_epoch=request.fence,
            commit_started_at=self.clock(),
        )
        try:
            await self.committer.commit(request)
        except CommitError as exc:
            failure = exc.reason
            log.warning(
                "commit of group %s checkpoint %s (attempt %s) failed: %s",
                request.group_id,
                request.checkpoint_id,
                request.attempt,
                exc,
                extra=context,
            )
        except Exception as exc:
            failure = INTERNAL_FAILURE
            log.exception("commit of group %s crashed: %s", request.group_id, exc, extra=context)
        else:
            if request.held_back:
                log.warning(
                    "group %s: partitions %s held at their committed offsets (no rewind)",
                    request.group_id,
                    [f"{tp.topic}/{tp.partition}" for tp in request.held_back],
                    extra=context,
                )
            if log.isEnabledFor(logging.INFO):  # one a commit: its text only when shown
                log.info(
                    "group %s committed checkpoint %s: %s",
                    request.group_id,
                    request.checkpoint_id,
                    describe(request.offsets),
                    extra=context,
                )
        finally:
            self.metrics.commit_took(request.cluster, time.monotonic() - started)
        await self.durable.finish_commit(request, self.clock(), failure)
        self.wake()

    async def stop(self, grace: float) -> None:
        self._stopping = True
        self.wake()
        self._flush()
        if not self._commits:
            return
        _, unfinished = await asyncio.wait(set(self._commits), timeout=grace)
        self.cancelled = len(unfinished)
        for task in unfinished:
            task.cancel()
        if unfinished:
            log.warning(
                "%d commits still in flight after %.1f s were cancelled; their offsets are "
                "kept and committed on the next start",
                len(unfinished),
                grace,
            )
            await asyncio.gather(*unfinished, return_exceptions=True)
