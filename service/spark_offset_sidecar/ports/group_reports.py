"""The reports of groups (``core.lag.report``) as every read of the API and ``/ui``
answers them, wherever they are kept.

Alone, the service builds them from its own memory when asked (the ledger, the lag
monitor's last evaluation, the committer, the checkpoint follower); with replicas, each
group's owner publishes them on the board (``ports.status_board``) and every replica
reads them there, so that all answer alike. The composition root chooses one of the two
(``runtime.group_reports``) once; routes never ask which.

Contract
  - ``every`` returns, by group id, the reports of ``group_ids`` (None: every group) that
    exist; a group with none is left out.
  - ``summaries`` returns the summaries (``core.lag.report.GroupSummary``) of every
    group ``every()`` would report, each as its report would say, without building the
    reports.
  - ``one`` returns the group's report, or ``Missing`` saying why there is none (an
    unknown group, a group whose owner has published nothing yet).
  - ``as_of`` says when ``reports`` (or their summaries) were evaluated (the newest
    evaluation) and their log ends read (the oldest read; None unless every one has one).
  - ``live`` returns the live commit state to show with each of ``group_ids`` where it is
    not the stored ledger's (a group left out: the ledger's state is the live one).
  - ``folders`` says, by path, how reading each followed folder of ``group_ids`` goes and
    which replica reads it (None: this process).
  - Methods that read may wait (a database read in a worker thread); the event loop keeps
    serving meanwhile.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from spark_offset_sidecar.core.lag.report import (
    FolderReport,
    GroupReport,
    GroupSummary,
    LiveCommits,
)


@dataclass(frozen=True)
class Missing:
    """Why a group has no report: ``outcome`` as the API names it, ``detail`` in words."""

    outcome: str
    detail: str


class GroupReports(Protocol):
    async def every(self, group_ids: Collection[str] | None = None) -> list[GroupReport]: ...

    async def summaries(self) -> list[GroupSummary]: ...

    async def one(self, group_id: str) -> GroupReport | Missing: ...

    def as_of(
        self, reports: Sequence[GroupReport | GroupSummary]
    ) -> tuple[float | None, float | None]: ...

    async def live(self, group_ids: Collection[str]) -> dict[str, LiveCommits]: ...

    async def folders(
        self, group_ids: Collection[str]
    ) -> dict[str, tuple[FolderReport, str | None]]: ...
