"""The ``/v1`` routes: events in (progress, checkpoints, completions), state out; their
status codes are in docs/api/index.md."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.lag.figures import JobRates
from spark_offset_sidecar.core.ledger.changes import Decision, Outcome
from spark_offset_sidecar.core.ledger.rules import unknown_query
from spark_offset_sidecar.core.names import TOPIC
from spark_offset_sidecar.core.offsets import MAX_OFFSET, OffsetMap, from_json
from spark_offset_sidecar.core.spark.progress import parse_progress
from spark_offset_sidecar.errors import InvalidEvent
from spark_offset_sidecar.http.access import (
    allow_read,
    allow_write,
    caller,
    caller_in,
    cluster_in,
    may_see,
    running_in,
    running_of,
    runtime_of,
)
from spark_offset_sidecar.http.auth import TokenGrant
from spark_offset_sidecar.http.models import (
    CheckpointEvent,
    CommitIntervalRequest,
    EventAnswer,
    GroupId,
    ProgressEvent,
    QueryId,
    QueryView,
    StartingOffsetsAnswer,
    refusals,
)
from spark_offset_sidecar.observe.logs import about

if TYPE_CHECKING:
    from spark_offset_sidecar.core.ledger.rules import Ledger
    from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
    from spark_offset_sidecar.settings import HttpSettings

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["events"])

_NOT_FOUND = {Outcome.UNKNOWN_CHECKPOINT: 404, Outcome.UNKNOWN_QUERY: 404}
STATUS = {**dict.fromkeys(Outcome, 200), **_NOT_FOUND, Outcome.CONFLICT: 409}
# Outcomes an operator should see at INFO: a job pointed at another job's group, or events
# that reference nothing (a job sending to the wrong service, or state that was lost).
_LOG_LEVEL = {**dict.fromkeys(_NOT_FOUND, logging.INFO), Outcome.CONFLICT: logging.WARNING}
ERRORS = refusals(401, 403, 404, 409, 413, 422, 429, 503)


def _durable(request: Request) -> DurableLedger:
    return running_of(request).durable


def _limit_topics(limits: HttpSettings, count: int, field: str) -> None:
    if count > limits.max_topics_per_event:
        raise InvalidEvent(
            field,
            f"{count} topics; at most {limits.max_topics_per_event} (SIDECAR_MAX_TOPICS_PER_EVENT)",
        )


def _limit(limits: HttpSettings, offsets: OffsetMap, field: str) -> None:
    _limit_topics(limits, len({tp.topic for tp in offsets}), field)
    if len(offsets) > limits.max_partitions_per_event:
        raise InvalidEvent(
            field,
            f"{len(offsets)} partitions; at most {limits.max_partitions_per_event} "
            "(SIDECAR_MAX_PARTITIONS_PER_EVENT)",
        )


def _on_query(
    request: Request,
    grant: TokenGrant | None,
    query_id: str,
    decide: Callable[[Ledger], Decision],
    **where: int,
) -> Callable[[Ledger], Decision]:
    """``decide``, once ``grant`` may write to the query's group: checked with the decision,
    when memory holds the query as stored (another replica may have registered it). A
    query the caller may not touch is answered as an unknown one."""

    def checked(ledger: Ledger) -> Decision:
        query = ledger.queries.get(query_id)
        if query is not None and not may_see(request, grant, query.group_id, write=True):
            return unknown_query(query_id, **where)
        return decide(ledger)

    return checked


def _view_of(request: Request) -> tuple[float, Clusters]:
    """What a ``QueryView`` needs of the service: its default commit interval, its clusters."""
    runtime = runtime_of(request)
    return runtime.settings.commits.min_commit_interval_seconds, runtime.clusters


def _answer(decision: Decision) -> JSONResponse:
    level = _LOG_LEVEL.get(decision.outcome, logging.DEBUG)
    if log.isEnabledFor(level):  # the hot path: build nothing for a line nobody reads
        log.log(
            level,
            "%s: %s",
            decision.outcome.value,
            decision.detail,
            extra=about(
                query_id=decision.query_id,
                group_id=decision.group_id,
                checkpoint_id=decision.checkpoint_id,
            ),
        )
    # An ``EventAnswer``, built as a dict (its fields in its order): the hot path's answer.
    body: dict[str, object] = {
        "outcome": decision.outcome.value,
        "detail": decision.detail,
        "errors": [],
        "query_id": decision.query_id,
        "group_id": decision.group_id,
        "checkpoint_id": decision.checkpoint_id,
    }
    return JSONResponse(body, status_code=STATUS[decision.outcome])


async def record_progress(
    request: Request, group_id: str, progress: dict[str, Any], cluster: str | None = None
) -> Response:
    """Record a progress event of ``group_id`` (body already shaped as ``ProgressEvent``)
    and answer it; refusals are raised (``http.refusals`` answers them). Shared by the
    FastAPI route below and the hot path (``http.progress_route``)."""
    runtime = runtime_of(request)  # looked up once: every Spark batch comes this way
    grant = await caller_in(runtime, request, event=True)
    report = parse_progress(progress)
    _limit(runtime.settings.http, report.offsets, "progress.sources")
    allow_write(grant, group_id, {tp.topic for tp in report.offsets})
    where = cluster_in(runtime, group_id, cluster)
    now = runtime.clock()
    running = running_in(runtime)  # 503 while starting, after the event's own refusals
    decision = await running.durable.record(
        lambda ledger: ledger.decide_progress(
            report.query_id, group_id, report.run_id, report.batch_id, report.offsets, now, where
        ),
        query_id=report.query_id,
        group_id=group_id,
    )
    if decision.outcome is Outcome.ACCEPTED:
        running.jobs.note_job(
            group_id,
            JobRates(
                now,
                report.input_rows_per_second,
                report.processed_rows_per_second,
                report.batch_duration_ms,
            ),
        )
    return _answer(decision)


@router.post("/progress", response_model=EventAnswer, responses=ERRORS)
async def post_progress(event: ProgressEvent, request: Request) -> Response:
    """Record a Spark progress event: checkpoint ``progress.batchId`` of query
    ``progress.id``, with the end offsets of every Kafka source, completed at once.
    (Well-formed events are answered by ``http.progress_route`` before they reach here,
    with the same answers.)"""
    return await record_progress(request, event.group_id, event.progress, event.cluster)


@router.post("/queries/{query_id}/checkpoints", response_model=EventAnswer, responses=ERRORS)
async def post_checkpoint(
    query_id: QueryId, event: CheckpointEvent, request: Request
) -> JSONResponse:
    """A pending snapshot (Flink ``snapshotState``): offsets reached at ``checkpoint_id``."""
    grant = await caller(request, event=True)
    offsets = from_json(event.offsets)
    _limit(runtime_of(request).settings.http, offsets, "offsets")
    allow_write(grant, event.group_id, {tp.topic for tp in offsets})
    where = cluster_in(runtime_of(request), event.group_id, event.cluster)
    now = runtime_of(request).clock()
    decision = await _durable(request).record(
        lambda ledger: ledger.decide_snapshot(
            query_id, event.group_id, event.checkpoint_id, event.run_id, offsets, now, where
        ),
        query_id=query_id,
        group_id=event.group_id,
    )
    return _answer(decision)


@router.post(
    "/queries/{query_id}/checkpoints/{checkpoint_id}/complete",
    response_model=EventAnswer,
    responses=ERRORS,
)
async def complete_checkpoint(
    query_id: QueryId,
    checkpoint_id: Annotated[int, Path(ge=0, le=MAX_OFFSET)],
    request: Request,
) -> JSONResponse:
    """Flink ``notifyCheckpointComplete``: drop it and every older pending checkpoint,
    and commit its offsets."""
    grant = await caller(request, event=True)
    now = runtime_of(request).clock()
    decision = await _durable(request).record(
        _on_query(
            request,
            grant,
            query_id,
            lambda ledger: ledger.decide_complete(query_id, checkpoint_id, now),
            checkpoint_id=checkpoint_id,
        ),
        query_id=query_id,
    )
    return _answer(decision)


@router.delete("/queries/{query_id}", response_model=EventAnswer, responses=ERRORS)
async def release_query(query_id: QueryId, request: Request) -> JSONResponse:
    """Forget a query (e.g. its Spark checkpoint was deleted and it restarts with a new
    id): its pending checkpoints and uncommitted slot go, its group is free for another
    query. Offsets already committed in Kafka stay."""
    grant = await caller(request, event=True)
    decision = await _durable(request).record(
        _on_query(request, grant, query_id, lambda ledger: ledger.decide_release(query_id)),
        query_id=query_id,
    )
    return _answer(decision)


@router.post("/groups/{group_id}/allow-rewind", response_model=EventAnswer, responses=ERRORS)
async def allow_rewind(group_id: GroupId, request: Request) -> JSONResponse:
    """Let the next commit of the group move partitions backwards (once)."""
    allow_write(await caller(request, event=True), group_id)
    decision = await _durable(request).record(
        lambda ledger: ledger.decide_allow_rewind(group_id), group_id=group_id
    )
    return _answer(decision)


@router.put("/groups/{group_id}/commit-interval", response_model=EventAnswer, responses=ERRORS)
async def set_commit_interval(
    group_id: GroupId, body: CommitIntervalRequest, request: Request
) -> JSONResponse:
    """Commit the group at most once per ``seconds`` (its newest offsets, at most that
    late); ``null`` returns it to the service's default. Needs write on the group."""
    allow_write(await caller(request, event=True), group_id)
    decision = await _durable(request).record(
        lambda ledger: ledger.decide_commit_interval(group_id, body.seconds), group_id=group_id
    )
    return _answer(decision)


@router.get(
    "/groups/{group_id}/starting-offsets",
    response_model=StartingOffsetsAnswer,
    responses=ERRORS,
    tags=["recovery"],
)
async def get_starting_offsets(
    group_id: GroupId,
    request: Request,
    topic: Annotated[list[str] | None, Query(description="topics the query reads")] = None,
) -> StartingOffsetsAnswer:
    """The ``startingOffsets`` that restarts a query whose checkpoint was lost exactly where
    the group's committed offsets in Kafka stand (partitions never committed: -2, earliest).
    The restarted query has a new id: release the old one (``DELETE /v1/queries/{id}``)."""
    allow_read(await caller(request, event=False), group_id)
    _limit_topics(runtime_of(request).settings.http, len(topic or ()), "topic")
    for name in topic or ():
        if problem := TOPIC.problem(name):
            raise InvalidEvent("topic", problem)
    found = await running_of(request).starting_offsets(group_id, topic or ())
    return StartingOffsetsAnswer(
        group_id=group_id,
        starting_offsets=found.offsets,
        spark_option=found.spark_option(),
        uncommitted_partitions=found.uncommitted,
    )


@router.get("/queries", response_model=list[QueryView], tags=["state"])
async def list_queries(request: Request) -> list[QueryView]:
    """Every query (with a token: those whose groups it may touch)."""
    grant = await caller(request, event=False)
    stored = await _durable(request).every_query()
    groups = {g.group_id: g for g in stored.groups}
    visible = [
        q
        for q in stored.queries
        if q.group_id in groups and (grant is None or grant.may_read(q.group_id))
    ]
    live = await running_of(request).reports.live({q.group_id for q in visible})
    interval, clusters = _view_of(request)
    return [
        QueryView.of(q, groups[q.group_id], live.get(q.group_id), interval, clusters)
        for q in sorted(visible, key=lambda q: q.query_id)
    ]


@router.get("/queries/{query_id}", response_model=QueryView, responses=ERRORS, tags=["state"])
async def get_query(query_id: QueryId, request: Request) -> QueryView | JSONResponse:
    grant = await caller(request, event=False)
    ledger = await _durable(request).current([query_id])
    query = ledger.queries.get(query_id)
    if query is None or not may_see(request, grant, query.group_id, write=False):
        return _answer(unknown_query(query_id))
    live = await running_of(request).reports.live({query.group_id})
    group = ledger.groups[query.group_id]
    return QueryView.of(query, group, live.get(query.group_id), *_view_of(request))
