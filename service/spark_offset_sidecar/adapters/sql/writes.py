"""How a batch of ledger changes becomes SQL: few statements, each run with executemany.

The changes are put in *layers*: a change that shares a query or group with an earlier
one lands in a later layer (layer = 1 + the highest layer of such a change), so changes
of one row keep their order, and those of different rows, which commute, go together:
each layer's changes of one kind are one ``executemany``. ``CommitStarted`` and
``CommitFailed`` are not written: the slot row stays until a success.

Each statement is a ``_Write``, compiled once per dialect and run as the driver's SQL
(docs/decisions.md, "Statements as the driver's SQL"). Sound because no written column's
type converts values on the way in (strings, integers, floats, booleans; JSON as text).
"""

from __future__ import annotations

import importlib
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, update
from sqlalchemy.sql.dml import UpdateBase

from spark_offset_sidecar.adapters.sql.schema import consumer_groups, pending_checkpoints, queries
from spark_offset_sidecar.core.ledger.changes import (
    Change,
    CheckpointAdded,
    CheckpointCompleted,
    CommitIntervalSet,
    CommitSucceeded,
    QueryRegistered,
    QueryReleased,
    RewindAllowed,
)
from spark_offset_sidecar.core.offsets import OffsetMap, to_json

Params = list[dict[str, Any]]
groups_c, pending_c, queries_c = consumer_groups.c, pending_checkpoints.c, queries.c


def dumps(offsets: OffsetMap) -> str:
    return json.dumps(to_json(offsets), separators=(",", ":"))


def write_changes(conn: Connection, changes: Sequence[Change]) -> None:
    """Write ``changes`` (inside the caller's transaction)."""
    layers: list[dict[type[Any], list[Any]]] = []
    last_layer: dict[tuple[str, str], int] = {}
    for change in changes:
        kind = type(change)
        if kind not in _WRITERS:
            continue
        keys = keys_of(change)
        layer = 1 + max((last_layer.get(k, -1) for k in keys), default=-1)
        for key in keys:
            last_layer[key] = layer
        if layer == len(layers):
            layers.append(defaultdict(list))
        layers[layer][kind].append(change)
    for layer_changes in layers:
        for kind, of_kind in layer_changes.items():
            _WRITERS[kind](conn, of_kind)


def keys_of(change: Change) -> tuple[tuple[str, str], ...]:
    """The rows ``change`` writes: ``("q", query id)`` and ``("g", group id)``."""
    if isinstance(change, QueryRegistered | QueryReleased):
        return ("q", change.query_id), ("g", change.group_id)
    if isinstance(change, CheckpointAdded):
        return (("q", change.checkpoint.query_id),)
    if isinstance(change, CheckpointCompleted):
        return ("q", change.checkpoint.query_id), ("g", change.checkpoint.group_id)
    if isinstance(change, CommitSucceeded):
        return (("g", change.request.group_id),)
    if isinstance(change, RewindAllowed | CommitIntervalSet):
        return (("g", change.group_id),)
    raise TypeError(f"no keys for {type(change).__name__}")


class _Write:
    """One write statement; its rows' parameters are named ``b_*``, every other parameter
    of it is a constant of the statement (e.g. the NULLs of an emptied slot). A row may
    hold more than the statement's parameters: the driver takes those it names."""

    def __init__(self, statement: UpdateBase) -> None:
        self.statement = statement
        self._compiled: dict[str, tuple[str, dict[str, Any], tuple[str, ...] | None]] = {}

    def run(self, conn: Connection, rows: Params) -> None:
        if not rows:
            return
        sql, constants, positions = self._compiled.get(conn.dialect.name) or self._compile(conn)
        if constants:
            rows = [{**constants, **row} for row in rows]
        if positions is None:  # named parameters (psycopg): the rows as they are
            conn.exec_driver_sql(sql, rows)
        else:  # positional parameters (sqlite3's "?"): in the text's order
            conn.exec_driver_sql(sql, [tuple(row[name] for name in positions) for row in rows])

    def _compile(self, conn: Connection) -> tuple[str, dict[str, Any], tuple[str, ...] | None]:
        compiled = self.statement.compile(dialect=conn.dialect)
        constants = {k: v for k, v in compiled.params.items() if not k.startswith("b_")}
        positions = tuple(compiled.positiontup) if compiled.positiontup else None
        found = self._compiled[conn.dialect.name] = (str(compiled), constants, positions)
        return found


_INSERT_GROUP_IF_NEW: dict[str, _Write] = {}  # by dialect's name


def _group_if_new(conn: Connection) -> _Write:
    """The insert of a group that skips one already there (``ON CONFLICT DO NOTHING``),
    in the connection's dialect: made at its first use from the dialect's module, which
    its engine loaded (a service on SQLite never imports PostgreSQL's)."""
    name = conn.dialect.name
    if name not in _INSERT_GROUP_IF_NEW:
        dialect = importlib.import_module(f"sqlalchemy.dialects.{name}")
        _INSERT_GROUP_IF_NEW[name] = _Write(
            dialect.insert(consumer_groups)
            .values(
                group_id=bindparam("b_group"), rewind_allowed=False, cluster=bindparam("b_cluster")
            )
            .on_conflict_do_nothing(index_elements=["group_id"])
        )
    return _INSERT_GROUP_IF_NEW[name]


_EMPTY_SLOT = {
    "slot_query_id": None,
    "slot_checkpoint_id": None,
    "slot_run_id": None,
    "slot_offsets": None,
    "slot_completed_at": None,
}

_DELETE_PENDING_UP_TO = _Write(
    delete(pending_checkpoints).where(
        pending_c.query_id == bindparam("b_query"), pending_c.checkpoint_id <= bindparam("b_id")
    )
)
_DELETE_PENDING_ONE = _Write(
    delete(pending_checkpoints).where(
        pending_c.query_id == bindparam("b_query"), pending_c.checkpoint_id == bindparam("b_id")
    )
)
_DELETE_PENDING_OF_QUERY = _Write(
    delete(pending_checkpoints).where(pending_c.query_id == bindparam("b_query"))
)
_INSERT_PENDING = _Write(
    insert(pending_checkpoints).values(
        query_id=bindparam("b_query"),
        checkpoint_id=bindparam("b_id"),
        run_id=bindparam("b_run"),
        offsets=bindparam("b_offsets"),
        created_at=bindparam("b_at"),
    )
)
_INSERT_QUERY = _Write(
    insert(queries).values(
        query_id=bindparam("b_query"),
        group_id=bindparam("b_group"),
        registered_at=bindparam("b_at"),
    )
)
_DELETE_QUERY = _Write(delete(queries).where(queries_c.query_id == bindparam("b_query")))
_SET_COMPLETED = _Write(
    update(queries)
    .where(queries_c.query_id == bindparam("b_query"))
    .values(last_completed_id=bindparam("b_id"), last_run_id=bindparam("b_run"))
)
_SET_SLOT = _Write(
    update(consumer_groups)
    .where(groups_c.group_id == bindparam("b_group"))
    .values(
        slot_query_id=bindparam("b_query"),
        slot_checkpoint_id=bindparam("b_id"),
        slot_run_id=bindparam("b_run"),
        slot_offsets=bindparam("b_offsets"),
        slot_completed_at=bindparam("b_at"),
    )
)
_COMMITTED: dict[str, Any] = {
    "committed_query_id": bindparam("b_query"),
    "committed_checkpoint_id": bindparam("b_id"),
    "committed_offsets": bindparam("b_offsets"),
    "committed_at": bindparam("b_at"),
}
_SET_COMMITTED = _Write(
    update(consumer_groups).where(groups_c.group_id == bindparam("b_group")).values(_COMMITTED)
)
_SET_COMMITTED_REWOUND = _Write(
    update(consumer_groups)
    .where(groups_c.group_id == bindparam("b_group"))
    .values({**_COMMITTED, "rewind_allowed": False})
)
# The slot keeps a newer entry that arrived while the commit was in flight.
_CLEAR_COMMITTED_SLOT = _Write(
    update(consumer_groups)
    .where(
        groups_c.group_id == bindparam("b_group"),
        groups_c.slot_query_id == bindparam("b_query"),
        groups_c.slot_checkpoint_id == bindparam("b_id"),
    )
    .values(_EMPTY_SLOT)
)
_CLEAR_RELEASED_SLOT = _Write(
    update(consumer_groups)
    .where(
        groups_c.group_id == bindparam("b_group"), groups_c.slot_query_id == bindparam("b_query")
    )
    .values(_EMPTY_SLOT)
)
_SET_COMMIT_INTERVAL = _Write(
    update(consumer_groups)
    .where(groups_c.group_id == bindparam("b_group"))
    .values(commit_interval_seconds=bindparam("b_seconds"))
)
_ALLOW_REWIND = _Write(
    update(consumer_groups)
    .where(groups_c.group_id == bindparam("b_group"))
    .values(rewind_allowed=True)
)


def _registered(conn: Connection, changes: list[QueryRegistered]) -> None:
    _INSERT_QUERY.run(
        conn,
        [{"b_query": c.query_id, "b_group": c.group_id, "b_at": c.at} for c in changes],
    )
    groups = [{"b_group": c.group_id, "b_cluster": c.cluster} for c in changes]
    _group_if_new(conn).run(conn, groups)


def _added(conn: Connection, changes: list[CheckpointAdded]) -> None:
    dropped = [
        {"b_query": c.checkpoint.query_id, "b_id": checkpoint_id}
        for c in changes
        for checkpoint_id in c.dropped
    ]
    _DELETE_PENDING_ONE.run(conn, dropped)
    _INSERT_PENDING.run(
        conn,
        [
            {
                "b_query": c.checkpoint.query_id,
                "b_id": c.checkpoint.checkpoint_id,
                "b_run": c.checkpoint.run_id,
                "b_offsets": dumps(c.checkpoint.offsets),
                "b_at": c.checkpoint.created_at,
            }
            for c in changes
        ],
    )


def _completed(conn: Connection, changes: list[CheckpointCompleted]) -> None:
    params = [
        {
            "b_query": c.checkpoint.query_id,
            "b_group": c.checkpoint.group_id,
            "b_id": c.checkpoint.checkpoint_id,
            "b_run": c.checkpoint.run_id,
            "b_offsets": dumps(c.checkpoint.offsets),
            "b_at": c.at,
        }
        for c in changes
    ]
    _DELETE_PENDING_UP_TO.run(conn, params)
    _SET_COMPLETED.run(conn, params)
    _SET_SLOT.run(conn, params)


def _succeeded(conn: Connection, changes: list[CommitSucceeded]) -> None:
    params = [
        {
            "b_group": c.request.group_id,
            "b_query": c.request.query_id,
            "b_id": c.request.checkpoint_id,
            "b_offsets": dumps(c.committed),
            "b_at": c.at,
            "rewind": c.request.rewind,
        }
        for c in changes
    ]
    for statement, rewind in ((_SET_COMMITTED, False), (_SET_COMMITTED_REWOUND, True)):
        statement.run(conn, [p for p in params if p["rewind"] is rewind])
    _CLEAR_COMMITTED_SLOT.run(conn, params)


def _released(conn: Connection, changes: list[QueryReleased]) -> None:
    params = [{"b_query": c.query_id, "b_group": c.group_id} for c in changes]
    _DELETE_PENDING_OF_QUERY.run(conn, params)
    _DELETE_QUERY.run(conn, params)
    _CLEAR_RELEASED_SLOT.run(conn, params)


def _rewind_allowed(conn: Connection, changes: list[RewindAllowed]) -> None:
    _ALLOW_REWIND.run(conn, [{"b_group": c.group_id} for c in changes])


def _commit_interval_set(conn: Connection, changes: list[CommitIntervalSet]) -> None:
    _SET_COMMIT_INTERVAL.run(
        conn, [{"b_group": c.group_id, "b_seconds": c.seconds} for c in changes]
    )


_WRITERS: dict[type[Any], Callable[[Connection, Any], None]] = {
    QueryRegistered: _registered,
    CheckpointAdded: _added,
    CheckpointCompleted: _completed,
    CommitSucceeded: _succeeded,
    QueryReleased: _released,
    RewindAllowed: _rewind_allowed,
    CommitIntervalSet: _commit_interval_set,
}
WRITTEN = frozenset(_WRITERS)
