"""The two ways of keeping the groups' reports (``ports.group_reports``): this process's
memory when alone, the board of the groups' owners when replicated; and what the process
taking events evaluates itself (``JobsSeen``: its watcher reads the log ends)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from spark_offset_sidecar.core.lag.figures import (
    GroupLag,
    GroupTrend,
    JobRates,
    PackedLags,
    data_status,
    partition_lag,
)
from spark_offset_sidecar.core.lag.report import (
    NOT_REPORTED,
    FolderReport,
    GroupReport,
    GroupSummary,
    LiveCommits,
    live_of,
    report_of,
    summary,
    summary_of,
)
from spark_offset_sidecar.core.lag.status import CommitWindows, GroupStatus
from spark_offset_sidecar.core.ledger.changes import Outcome
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import GroupState
from spark_offset_sidecar.ports.group_reports import Missing
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.runtime.lag_monitor import Evaluation
from spark_offset_sidecar.turns import Turns

FolderReports = Callable[[], Mapping[str, tuple[FolderReport, ...]]]


UNREAD = (None, None, None, None)  # a partition's log start and end, record time, start rate


class JobsSeen:
    """What the process taking events evaluates itself: the jobs' rates from their progress
    events (told to its watcher, which reads the log ends), and no evaluation of its own:
    a group evaluated now reads as a lag monitor's before its first read."""

    def __init__(self, err_after_failures: int, waits: Callable[[str], str | None]) -> None:
        self.err_after = err_after_failures
        self.waits = waits
        self.jobs: dict[str, JobRates] = {}  # by group: its last progress

    def last_evaluation(self) -> Evaluation:
        return Evaluation()  # none: its watcher evaluates

    def note_job(self, group_id: str, rates: JobRates) -> None:
        self.jobs[group_id] = rates

    def job_of(self, group_id: str) -> JobRates | None:
        return self.jobs.get(group_id)

    def report(
        self, status: GroupStatus, group: GroupState, ledger: Ledger, now: float
    ) -> GroupReport:
        """``status`` with the group's lag figures before any read of its log ends."""
        lag = None
        if group.committed is not None:  # no lag to speak of before a first commit
            offsets = sorted(group.committed.offsets.items())
            parts = [partition_lag(tp.topic, tp.partition, o, *UNREAD, now) for tp, o in offsets]
            job = self.jobs.get(group.group_id)
            catch_up = GroupTrend().catch_up(status.total_lag, job)
            lag = GroupLag(PackedLags(parts), data_status(parts, 0.0), 0, catch_up, ())
        query = ledger.queries.get(group.query_id) if group.query_id else None
        pending = len(query.pending) if query is not None else 0
        waiting = self.waits(group.group_id) if group.in_flight is not None else None
        return report_of(status, group, pending, now, None, lag=lag, waiting=waiting)

    def report_now(self, group: GroupState, ledger: Ledger, now: float) -> GroupReport:
        status = CommitWindows().evaluate(group, {}, now, err_after=self.err_after)
        return self.report(status, group, ledger, now)


class Evaluator(Protocol):
    """What ``LocalReports`` reads: a lag monitor (or several), or ``JobsSeen``."""

    def last_evaluation(self) -> Evaluation: ...

    def report(
        self, status: GroupStatus, group: GroupState, ledger: Ledger, now: float
    ) -> GroupReport: ...

    def report_now(self, group: GroupState, ledger: Ledger, now: float) -> GroupReport: ...


class LocalReports:
    """Reports built from this process's memory when asked: the lag monitor's last
    evaluation for the lists, a group evaluated now for ``one``."""

    def __init__(
        self,
        ledger: Callable[[], Ledger],
        monitor: Evaluator,
        waiting: Callable[[str], str | None],
        folders: FolderReports,
        clock: Callable[[], float],
    ) -> None:
        """``waiting``: the committer's word on a group's commit in flight; ``folders``:
        the checkpoint follower's reports, by group."""
        self._ledger = ledger
        self._monitor = monitor
        self._waiting = waiting
        self._folders = folders
        self._clock = clock
        self._summaries: list[GroupSummary] = []
        self._summarised: tuple[int, float | None] | None = None  # (rounds, read_at)

    async def every(self, group_ids: Collection[str] | None = None) -> list[GroupReport]:
        ledger, monitor = self._ledger(), self._monitor
        evaluation = monitor.last_evaluation()
        statuses, at = evaluation.statuses, evaluation.evaluated_at or 0.0
        wanted = statuses.keys() if group_ids is None else statuses.keys() & set(group_ids)
        reports = []
        turns = Turns()  # thousands of groups: events are answered in between
        for group_id in sorted(wanted):
            group = ledger.groups.get(group_id)
            if group is not None:
                reports.append(monitor.report(statuses[group_id], group, ledger, at))
            await turns.take()
        return reports

    async def summaries(self) -> list[GroupSummary]:
        """From the lag monitor's last evaluation, built once per evaluation (and read of
        the log ends): the lists read until the next share them."""
        evaluation = self._monitor.last_evaluation()
        as_of = (evaluation.rounds, evaluation.read_at)
        if self._summarised != as_of:
            lags, read_at = evaluation.lags, evaluation.read_at
            evaluated_at = evaluation.evaluated_at or 0.0
            built = []
            turns = Turns()
            for group_id, status in sorted(evaluation.statuses.items()):
                built.append(summary(status, lags.get(group_id), evaluated_at, read_at))
                await turns.take()
            self._summaries, self._summarised = built, as_of
        groups = self._ledger().groups
        return [s for s in self._summaries if s.group_id in groups]

    async def one(self, group_id: str) -> GroupReport | Missing:
        ledger = self._ledger()
        group = ledger.groups.get(group_id)
        if group is None or not ledger.commits(group_id):
            return Missing(Outcome.UNKNOWN_QUERY.value, f"no group {group_id} is known")
        return self._monitor.report_now(group, ledger, self._clock())

    def as_of(
        self, reports: Sequence[GroupReport | GroupSummary]
    ) -> tuple[float | None, float | None]:
        evaluation = self._monitor.last_evaluation()
        return evaluation.evaluated_at, evaluation.read_at

    async def live(self, group_ids: Collection[str]) -> dict[str, LiveCommits]:
        """The groups whose commit in flight waits, with the committer's word on why: for
        the others the ledger's memory is the live state."""
        groups = self._ledger().groups
        return {
            g: live_of(groups[g], why)
            for g in group_ids
            if g in groups and groups[g].in_flight is not None and (why := self._waiting(g))
        }

    async def folders(
        self, group_ids: Collection[str]
    ) -> dict[str, tuple[FolderReport, str | None]]:
        local = self._folders()
        return {f.path: (f, None) for group_id in group_ids for f in local.get(group_id, ())}


class PublishedReports:
    """Reports as the groups' owners last published them on the board, read in a worker
    thread (a blocking database read): every replica answers alike."""

    def __init__(self, board: StatusBoard) -> None:
        self._board = board

    async def every(self, group_ids: Collection[str] | None = None) -> list[GroupReport]:
        if group_ids is not None and not group_ids:
            return []
        return await asyncio.to_thread(self._board.read, group_ids)

    async def summaries(self) -> list[GroupSummary]:
        return [summary_of(report) for report in await self.every()]

    async def one(self, group_id: str) -> GroupReport | Missing:
        found = await self.every([group_id])
        if found:
            return found[0]
        return Missing(
            "not_reported",
            f"no status of group {group_id} has been published: its owner publishes one "
            "after each read of the log ends (lag_read_interval_seconds)",
        )

    def as_of(
        self, reports: Sequence[GroupReport | GroupSummary]
    ) -> tuple[float | None, float | None]:
        reads = [r.log_ends_read_at for r in reports if r.log_ends_read_at is not None]
        return (
            max((r.evaluated_at for r in reports), default=None),
            min(reads) if reads and len(reads) == len(reports) else None,
        )

    async def live(self, group_ids: Collection[str]) -> dict[str, LiveCommits]:
        """Every group's, as published (a group not reported yet shows none)."""
        published = {r.status.group_id: r.live for r in await self.every(group_ids)}
        return {g: published.get(g, NOT_REPORTED) for g in group_ids}

    async def folders(
        self, group_ids: Collection[str]
    ) -> dict[str, tuple[FolderReport, str | None]]:
        return {f.path: (f, r.reported_by) for r in await self.every(group_ids) for f in r.folders}
