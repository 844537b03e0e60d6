"""``GET /v1/status``: every group's Burrow-style status (``core.group_status``) as JSON,
shaped like Burrow's ``/v3/kafka/<cluster>/consumer/<group>/status`` answer so that the same
scripts read both, plus the query that owns the group and its failed commits.

The list is as of the lag monitor's last read (``evaluated_at``); one group's status is
evaluated when asked, on the last known log ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from spark_offset_sidecar.core.changes import Outcome
from spark_offset_sidecar.core.group_status import GroupStatus, PartitionStatus
from spark_offset_sidecar.http.access import allow_read, caller, runtime_of
from spark_offset_sidecar.http.auth import TokenGrant
from spark_offset_sidecar.http.models import GroupId
from spark_offset_sidecar.http.refusals import refusal

if TYPE_CHECKING:
    from spark_offset_sidecar.core.ledger import Ledger
    from spark_offset_sidecar.runtime.lag_monitor import LagMonitor

router = APIRouter(prefix="/v1", tags=["status"])


class PartitionStatusView(BaseModel):
    topic: str
    partition: int
    status: str
    current_offset: int
    log_end_offset: int | None
    current_lag: int | None = Field(description="null while the log end is unknown")
    samples: int = Field(description="commits in the window")

    @classmethod
    def of(cls, p: PartitionStatus) -> PartitionStatusView:
        return cls(
            topic=p.topic,
            partition=p.partition,
            status=p.status.value,
            current_offset=p.offset,
            log_end_offset=p.log_end,
            current_lag=p.current_lag,
            samples=p.samples,
        )


class GroupStatusView(BaseModel):
    group: str
    query_id: str | None
    status: str = Field(description="OK, WARN, STALL, STOP, REWIND or ERR")
    complete: float = Field(description="share of partitions with a full window")
    totallag: int | None
    partition_count: int
    maxlag: PartitionStatusView | None
    consecutive_failures: int
    last_commit_at: float | None
    partitions: list[PartitionStatusView]

    @classmethod
    def of(cls, status: GroupStatus) -> GroupStatusView:
        worst = status.max_lag
        return cls(
            group=status.group_id,
            query_id=status.query_id,
            status=status.status.value,
            complete=status.complete,
            totallag=status.total_lag,
            partition_count=len(status.partitions),
            maxlag=PartitionStatusView.of(worst) if worst else None,
            consecutive_failures=status.consecutive_failures,
            last_commit_at=status.last_commit_at,
            partitions=[PartitionStatusView.of(p) for p in status.partitions],
        )


class StatusAnswer(BaseModel):
    evaluated_at: float | None
    log_ends_read_at: float | None
    groups: list[GroupStatusView]


def monitor_of(request: Request) -> tuple[Ledger, LagMonitor]:
    runtime = runtime_of(request)
    if runtime.lag_monitor is None or runtime.durable is None:
        raise HTTPException(503, "the service is starting")
    return runtime.durable.ledger, runtime.lag_monitor


def readable_statuses(grant: TokenGrant | None, monitor: LagMonitor) -> list[GroupStatus]:
    """The last evaluated statuses of the groups ``grant`` may read (None: all), by group."""
    return [
        status
        for group_id, status in sorted(monitor.statuses.items())
        if grant is None or grant.may_read(group_id)
    ]


@router.get("/status", response_model=StatusAnswer)
async def list_status(request: Request) -> StatusAnswer:
    """Every group's status (with a token: the groups it may touch)."""
    grant = caller(request, event=False)
    _, monitor = monitor_of(request)
    return StatusAnswer(
        evaluated_at=monitor.evaluated_at,
        log_ends_read_at=monitor.read_at,
        groups=[GroupStatusView.of(status) for status in readable_statuses(grant, monitor)],
    )


@router.get("/status/{group_id}", response_model=GroupStatusView)
async def get_status(group_id: GroupId, request: Request) -> GroupStatusView | JSONResponse:
    """One group's status, evaluated now."""
    allow_read(caller(request, event=False), group_id)
    ledger, monitor = monitor_of(request)
    if not ledger.commits(group_id):
        return refusal(
            404,
            "not_owner",
            f"this replica does not commit group {group_id}: the replica holding its "
            "lease evaluates its status (and exports its lag)",
        )
    group = ledger.groups.get(group_id)
    if group is None:
        return refusal(404, Outcome.UNKNOWN_QUERY.value, f"no group {group_id} is known")
    return GroupStatusView.of(monitor.status_of(group, runtime_of(request).clock()))
