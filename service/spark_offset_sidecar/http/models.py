"""Request and answer bodies of the HTTP API (the contract in docs/api/)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from spark_offset_sidecar.core import names
from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.lag.report import LiveCommits, live_of
from spark_offset_sidecar.core.ledger.rules import GroupState, QueryState, checkpoints_behind
from spark_offset_sidecar.core.offsets import MAX_OFFSET, OffsetJson, to_json
from spark_offset_sidecar.core.spark.progress import kafka_offsets
from spark_offset_sidecar.errors import InvalidEvent
from spark_offset_sidecar.settings import MAX_COMMIT_INTERVAL

# A name of each kind (``core.names``) as the type of a body field, a path or a query
# string: the rule checks the value first, in its own words; the constraints beside it draw
# the OpenAPI schema (they cannot name every problem, lone surrogates least).


def checked_by(rule: names.NameRule) -> BeforeValidator:
    def check(value: object) -> object:
        if problem := rule.problem(value):
            raise ValueError(problem)
        return value

    return BeforeValidator(check)


def schema_of(rule: names.NameRule) -> StringConstraints:
    return StringConstraints(min_length=1, max_length=rule.max_length, pattern=rule.pattern)


GroupId = Annotated[str, schema_of(names.GROUP_ID), checked_by(names.GROUP_ID)]
RunId = Annotated[str, schema_of(names.RUN_ID), checked_by(names.RUN_ID)]
QueryId = Annotated[str, schema_of(names.QUERY_ID), checked_by(names.QUERY_ID)]
ClusterName = Annotated[
    str,
    schema_of(names.CLUSTER),
    checked_by(names.CLUSTER),
    Field(
        description="the Kafka cluster of the group's offsets (default: the service's choice "
        "for the group, SIDECAR_KAFKA_CLUSTER_BY_GROUP, else its default cluster)"
    ),
]
CheckpointId = Annotated[int, Field(strict=True, ge=0, le=MAX_OFFSET)]
# Fields of both a query's view and a group's status.
GroupCluster = Annotated[
    str | None,
    Field(description="the Kafka cluster of the group's offsets (with one cluster: its name)"),
]
CommitWaiting = Annotated[
    str | None,
    Field(
        description="why the commit in flight has no answer yet, when the committer knows "
        "(its coordinator cannot be reached: a broker died and Kafka has not moved the "
        "group yet); null otherwise"
    ),
]


class ProgressEvent(BaseModel):
    """A Spark StreamingQueryProgress, exactly as ``progress.json`` prints it."""

    model_config = ConfigDict(extra="forbid")
    group_id: GroupId
    progress: dict[str, Any]
    cluster: ClusterName | None = None


class CheckpointEvent(BaseModel):
    """A pending snapshot: the offsets a query will have reached at ``checkpoint_id``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {
                "checkpoint_id": 7,
                "group_id": "orders-enricher",
                "offsets": {"orders": {"0": 1042, "1": 977}},
                "run_id": "5f1c3c1e-2b6f-4bb2-9f7c-0d6f0c2b5d11",
            }
        },
    )
    checkpoint_id: CheckpointId
    group_id: GroupId
    offsets: dict[str, dict[str, Annotated[int, Field(strict=True)]]]
    run_id: RunId | None = None
    cluster: ClusterName | None = None

    @field_validator("offsets")
    @classmethod
    def _kafka_offsets(cls, value: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        try:
            flat = kafka_offsets(value, "offsets")
        except InvalidEvent as exc:
            raise ValueError(str(exc)) from None
        if not flat:
            raise ValueError("offsets: at least one topic partition is needed")
        return value


class CommitIntervalRequest(BaseModel):
    """A group's own minimum time between commits."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": {"seconds": 1.0}})
    seconds: float | None = Field(
        ge=0,
        le=MAX_COMMIT_INTERVAL,
        allow_inf_nan=False,
        description="at most one commit per this long; 0: every checkpoint; null: the "
        "service's default (SIDECAR_MIN_COMMIT_INTERVAL_SECONDS)",
    )


class FieldProblem(BaseModel):
    field: str
    problem: str


class ErrorAnswer(BaseModel):
    """The one shape of every refusal (``http.refusals``)."""

    outcome: str = Field(description="one word: invalid, forbidden, unknown_query, …")
    detail: str = Field(description="what happened, in words a person can act on")
    errors: list[FieldProblem] = Field(default=[], description="the fields at fault, if any")


# Refusals' descriptions in the API schema: RFC 9110's reason phrases, Python's own
# (http.HTTPStatus, which FastAPI uses) but those it renamed in 3.13.
_RENAMED = {413: "Content Too Large", 422: "Unprocessable Content"}


def refusals(*codes: int) -> dict[int | str, dict[str, object]]:
    """``responses=`` for a route that refuses with these statuses (an ``ErrorAnswer``)."""
    phrases = {code: _RENAMED.get(code, HTTPStatus(code).phrase) for code in codes}
    return {code: {"model": ErrorAnswer, "description": phrases[code]} for code in codes}


class EventAnswer(ErrorAnswer):
    """What became of an event; a refused event's answer is an ``ErrorAnswer`` too."""

    outcome: str = Field(description="accepted, duplicate, stale, ignored, unknown_checkpoint, …")
    query_id: str | None = None
    group_id: str | None = None
    checkpoint_id: int | None = None


# Offsets as the ledger keeps them (the views are read from its objects), shown as JSON.
Offsets = Annotated[OffsetJson, BeforeValidator(to_json)]


class CheckpointView(BaseModel, from_attributes=True):
    checkpoint_id: int
    run_id: str | None
    offsets: Offsets
    at: float = Field(validation_alias="created_at")


class CommitView(BaseModel, from_attributes=True):
    checkpoint_id: int
    offsets: Offsets
    attempt: int


class CommittedView(BaseModel, from_attributes=True):
    query_id: str
    checkpoint_id: int
    offsets: Offsets
    at: float


class CountersView(BaseModel, from_attributes=True):
    """What the group's owner did and saw: with replicas, since it took the group (its
    commits) and since it started (the events sent to it)."""

    # Read from ``GroupCounters``, whose names are the aliases.
    commits_succeeded: int = Field(validation_alias="succeeded")
    commits_failed: dict[str, int] = Field(validation_alias="failed")
    commits_skipped: int = Field(validation_alias="skipped")
    events: dict[str, int]
    pending_dropped: int
    partitions_held_back: int = Field(validation_alias="held_back")


class QueryView(BaseModel):
    query_id: str
    group_id: str
    cluster: GroupCluster = None
    run_id: str | None
    last_completed_checkpoint: int | None
    pending_checkpoints: list[int]
    slot: CheckpointView | None
    in_flight: CommitView | None
    committed: CommittedView | None
    retry_at: float | None
    last_failure: str | None
    commit_waiting: CommitWaiting = None
    rewind_allowed: bool
    commit_interval_seconds: float = Field(
        description="the group's minimum time between commits (its own, else the default)"
    )
    committed_behind_checkpoints: int = Field(
        description="completed checkpoints the committed offsets trail the newest by "
        "(0: the newest is committed or being committed)"
    )
    counters: CountersView

    @classmethod
    def of(
        cls,
        query: QueryState,
        group: GroupState,
        live: LiveCommits | None,
        default_interval: float,
        clusters: Clusters,
    ) -> QueryView:
        """The query's stored state with the live state of its group's commits: ``live``
        (with replicas, as its owner published it) or this process's memory of them."""
        live = live or live_of(group)
        return cls(
            query_id=query.query_id,
            group_id=query.group_id,
            cluster=clusters.name_of(group.cluster),
            run_id=query.last_run_id,
            last_completed_checkpoint=query.last_completed_id,
            pending_checkpoints=list(query.pending),
            slot=CheckpointView.model_validate(group.slot) if group.slot else None,
            in_flight=CommitView.model_validate(live.in_flight) if live.in_flight else None,
            committed=CommittedView.model_validate(group.committed) if group.committed else None,
            retry_at=live.retry_at,
            last_failure=live.last_failure,
            commit_waiting=live.waiting,
            rewind_allowed=group.rewind_allowed,
            commit_interval_seconds=(
                default_interval if group.commit_interval is None else group.commit_interval
            ),
            committed_behind_checkpoints=checkpoints_behind(group),
            counters=CountersView.model_validate(live.counters),
        )


class StartingOffsetsAnswer(BaseModel):
    group_id: str
    starting_offsets: OffsetJson = Field(description="-2 marks a partition with no commit")
    spark_option: str = Field(description='the value for .option("startingOffsets", ...)')
    uncommitted_partitions: list[str]


FolderPath = Annotated[
    str,
    schema_of(names.FOLDER_PATH),
    checked_by(names.FOLDER_PATH),
    Field(description="the checkpoint folder: /absolute/path, file://..., s3://bucket/key"),
]


class FollowRequest(BaseModel):
    """Follow a Spark checkpoint folder into a consumer group (no listener needed)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {"path": "s3://checkpoints/orders-to-parquet", "group_id": "orders"}
        },
    )
    path: FolderPath
    group_id: GroupId
    cluster: ClusterName | None = None


class FolderView(BaseModel):
    """A followed folder: what is registered, and how reading it goes on this replica."""

    path: str
    group_id: str
    cluster: str | None = Field(
        default=None, description="the Kafka cluster its registration named (null: none)"
    )
    topics: list[str] | None = Field(description="topic patterns allowed (None: any)")
    reading: bool = Field(description="it is read: polled by the replica that owns the group")
    read_by: str | None = Field(
        description="with replicas: the replica reading it, as it last reported (null alone)"
    )
    query_id: str | None = Field(description="the query id in the folder's metadata")
    newest_batch_in_folder: int | None = Field(description="the newest commits/N seen")
    last_batch_recorded: int | None = Field(description="newest batch handed to the ledger")
    pending_batch: int | None = Field(description="a planned batch recorded as pending")
    behind_seconds: float = Field(description="how long a completed batch waits unrecorded")
    errors: dict[str, int] = Field(description="failed polls by reason")
    last_error: str | None
    last_poll_at: float | None = Field(description="Unix time of the last good poll")


class ServiceView(BaseModel):
    """What runs and where (``topology``), with the service's version."""

    version: str = Field(description="the release of the service (spark-offset-sidecar)")
    watcher: str = Field(
        description="child (always): a process of its own that the service started, whose "
        "routes (/v1/status, /ui) this port passes on"
    )
    writer: str = Field(
        description="child: the events' batches written by a process of its own; thread: by "
        "a thread of this process (replicas, a store built in code)"
    )
    replicated: bool = Field(description="one of several replicas on one PostgreSQL")
    database: str = Field(description="sqlite, postgresql, or given (a store built in code)")
