"""``GET /v1/status``: every group's status as JSON, shaped like Burrow's
``/v3/kafka/<cluster>/consumer/<group>/status`` so that the same scripts read both
(docs/operate/status.md). With replicas, every replica answers from the reports the
groups' owners publish (``ports.status_board``): the same answer on each.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.lag.figures import PartitionLag
from spark_offset_sidecar.core.lag.report import GroupReport, GroupSummary
from spark_offset_sidecar.core.lag.status import PartitionStatus
from spark_offset_sidecar.http.access import allow_read, caller, reading_of, runtime_of
from spark_offset_sidecar.http.auth import TokenGrant
from spark_offset_sidecar.http.models import CommitWaiting, GroupCluster, GroupId
from spark_offset_sidecar.http.refusals import refusal
from spark_offset_sidecar.ports.group_reports import Missing
from spark_offset_sidecar.turns import Turns

router = APIRouter(prefix="/v1", tags=["status"])


class PartitionStatusView(BaseModel, from_attributes=True):
    topic: str
    partition: int
    status: str
    current_offset: int = Field(validation_alias="offset")  # of a ``PartitionStatus``
    log_end_offset: int | None = Field(validation_alias="log_end")
    current_lag: int | None = Field(description="null while the log end is unknown")
    samples: int = Field(description="commits in the window")
    log_start_offset: int | None = Field(
        default=None, description="the oldest offset not yet deleted (retention, DeleteRecords)"
    )
    lag_seconds: float | None = Field(
        default=None,
        description="age of the oldest record the job has not processed (0: caught up; "
        "null: not known yet)",
    )
    lost: int = Field(default=0, description="records deleted before the job read them, now")
    retention_margin: int | None = Field(
        default=None, description="records between the log start and the committed offset"
    )
    retention_margin_seconds: float | None = Field(
        default=None, description="estimated time until the committed offset is deleted"
    )

    @classmethod
    def of(cls, p: PartitionStatus, lag: PartitionLag | None = None) -> PartitionStatusView:
        view = cls.model_validate(p)
        if lag is not None:
            view.log_start_offset = lag.log_start
            view.lag_seconds = lag.lag_seconds
            view.lost = lag.lost
            view.retention_margin = lag.margin
            view.retention_margin_seconds = lag.margin_seconds
        return view


class JobRatesView(BaseModel, from_attributes=True):
    at: float = Field(description="Unix time of the progress event these come from")
    input_rows_per_second: float | None
    processed_rows_per_second: float | None = Field(
        description="what the job does at full speed: below the produce rate it cannot catch up"
    )
    batch_duration_ms: int | None


class CatchUpView(BaseModel, from_attributes=True):
    state: str = Field(
        description="caught_up, catching_up, falling_behind, stalled or unknown (too few reads)"
    )
    eta_seconds: float | None = Field(description="catching_up: until the lag is 0")
    consume_rate: float | None = Field(description="records/s the committed offsets advance")
    produce_rate: float | None = Field(description="records/s the log ends advance")
    lag_rate: float | None = Field(description="records/s the lag grows (negative: shrinks)")
    job: JobRatesView | None = Field(description="the job's last progress event's figures")


class GroupStatusView(BaseModel):
    group: str
    cluster: GroupCluster = None
    query_id: str | None
    status: str = Field(description="OK, WARN, STALL, STOP, REWIND or ERR")
    complete: float = Field(description="share of partitions with a full window")
    totallag: int | None = Field(
        description="records between the committed offsets and the log ends, summed; null "
        "while nothing is committed or a partition's log end is unknown (never 0 for unknown)"
    )
    partition_count: int
    maxlag: PartitionStatusView | None
    consecutive_failures: int
    commit_waiting: CommitWaiting = None
    last_commit_at: float | None
    evaluated_at: float = Field(description="Unix time of the evaluation this comes from")
    reported_by: str | None = Field(
        description="with replicas: the replica that evaluated it (the group's owner then)"
    )
    lag_seconds: float | None = Field(
        default=None,
        description="age of the oldest record the job has not processed, its latest "
        "partition's (0: caught up; null: not known yet)",
    )
    data_status: str | None = Field(
        default=None,
        description="OK, AT_RISK (unprocessed records soon deleted by retention) or LOST "
        "(some were deleted before the job read them); null: not evaluated yet",
    )
    messages_lost: int = Field(
        default=0, description="records deleted before the job read them, counted once, since start"
    )
    retention_margin_seconds: float | None = Field(
        default=None, description="the soonest an unprocessed record is estimated to be deleted"
    )
    catch_up: CatchUpView | None = None
    lag_trend: list[tuple[float, int]] = Field(
        default_factory=list, description="the last hour's lag, a point a minute: (time, lag)"
    )
    partitions: list[PartitionStatusView]

    @classmethod
    def of(cls, report: GroupReport, clusters: Clusters) -> GroupStatusView:
        status = report.status
        worst = status.max_lag
        lag = report.lag
        by_tp = {(p.topic, p.partition): p for p in lag.partitions} if lag is not None else {}
        return cls(
            group=status.group_id,
            cluster=clusters.name_of(report.cluster),
            query_id=status.query_id,
            status=status.status.value,
            complete=status.complete,
            totallag=status.total_lag,
            partition_count=len(status.partitions),
            maxlag=PartitionStatusView.of(worst) if worst else None,
            consecutive_failures=status.consecutive_failures,
            commit_waiting=report.live.waiting,
            last_commit_at=status.last_commit_at,
            evaluated_at=report.evaluated_at,
            reported_by=report.reported_by,
            lag_seconds=lag.lag_seconds if lag is not None else None,
            data_status=lag.data_status.value if lag is not None else None,
            messages_lost=lag.lost_total if lag is not None else 0,
            retention_margin_seconds=lag.margin_seconds if lag is not None else None,
            catch_up=CatchUpView.model_validate(lag.catch_up) if lag is not None else None,
            lag_trend=list(lag.trend) if lag is not None else [],
            partitions=[
                PartitionStatusView.of(p, by_tp.get((p.topic, p.partition)))
                for p in status.partitions
            ],
        )


class StatusAnswer(BaseModel):
    evaluated_at: float | None = Field(description="the newest evaluation listed")
    log_ends_read_at: float | None = Field(
        description="the oldest read of log ends that a listed lag comes from"
    )
    groups: list[GroupStatusView]


async def readable_summaries(request: Request, grant: TokenGrant | None) -> list[GroupSummary]:
    """The summaries of every group ``grant`` may read (None: all), by group."""
    return [
        summary
        for summary in await reading_of(request).reports.summaries()
        if grant is None or grant.may_read(summary.group_id)
    ]


@router.get("/status", response_model=StatusAnswer)
async def list_status(request: Request) -> StatusAnswer:
    """Every group's status (with a token: the groups it may touch)."""
    grant = await caller(request, event=False)
    source = reading_of(request).reports
    reports = [
        r for r in await source.every() if grant is None or grant.may_read(r.status.group_id)
    ]
    evaluated_at, read_at = source.as_of(reports)
    groups = []
    turns = Turns()
    for report in reports:
        groups.append(GroupStatusView.of(report, runtime_of(request).clusters))
        await turns.take()
    return StatusAnswer(evaluated_at=evaluated_at, log_ends_read_at=read_at, groups=groups)


@router.get("/status/{group_id}", response_model=GroupStatusView)
async def get_status(group_id: GroupId, request: Request) -> GroupStatusView | JSONResponse:
    """One group's status: alone evaluated now, with replicas as its owner last published."""
    allow_read(await caller(request, event=False), group_id)
    found = await reading_of(request).reports.one(group_id)
    if isinstance(found, Missing):
        return refusal(404, found.outcome, found.detail)
    return GroupStatusView.of(found, runtime_of(request).clusters)
