"""``ports.watcher.MemoryUpdate`` as JSON, between a service and its watcher: sent by
``WatcherChild.tell`` (``adapters.watcher.child``), read by the watcher's ``MEMORY_UPDATES``
route. No HTTP client here: the watcher, which only reads them, imports none.

Both ends run the same installed release (the child is this process's program), but a
message says its layout's version anyway, and a reader refuses any other rather than
misread it.
"""

from __future__ import annotations

import json
from typing import Any

from spark_offset_sidecar.adapters.report_fields import (
    decode_counters,
    decode_folder,
    decode_job,
    encode_counters,
    encode_folder,
    encode_job,
)
from spark_offset_sidecar.core.lag.group_memory import GroupMemory
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.state import CommittedOffsets
from spark_offset_sidecar.core.offsets import from_json, shared_partition, to_json
from spark_offset_sidecar.ports.watcher import MemoryUpdate

# 2: "owned" (a replica's groups); 3: "replica" (which one sends); 4: a group's last commit
# ("committed")
MEMORY_UPDATE_VERSION = 4


class MemoryUpdateRefused(ValueError):
    """A message that is not a ``MemoryUpdate`` of this layout."""


def encode_memory_update(update: MemoryUpdate) -> bytes:
    doc = {
        "version": MEMORY_UPDATE_VERSION,
        "whole": update.whole,
        "groups": {g: _encode_memory(m) if m else None for g, m in update.groups.items()},
        "folders": None
        if update.folders is None
        else {g: [encode_folder(f) for f in reports] for g, reports in update.folders.items()},
        "problems": None if update.problems is None else list(update.problems),
        "owned": None if update.owned is None else sorted(update.owned),
        "replica": update.replica,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_memory_update(body: bytes) -> MemoryUpdate:
    try:
        doc = json.loads(body)
        if doc.get("version") != MEMORY_UPDATE_VERSION:
            raise MemoryUpdateRefused(
                f"memory update version {doc.get('version')!r}; this one reads "
                f"{MEMORY_UPDATE_VERSION}"
            )
        folders, problems, owned, replica = (
            doc["folders"], doc["problems"], doc["owned"], doc["replica"]
        )  # fmt: skip
        if replica is not None and not (isinstance(replica, str) and replica):
            raise MemoryUpdateRefused(f"replica is not a replica id: {replica!r:.80}")
        return MemoryUpdate(
            {g: _decode_memory(m) if m else None for g, m in doc["groups"].items()},
            None
            if folders is None
            else {g: tuple(map(decode_folder, reports)) for g, reports in folders.items()},
            bool(doc["whole"]),
            None if problems is None else tuple(map(str, problems)),
            None if owned is None else _names(owned),
            replica,
        )
    except MemoryUpdateRefused:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MemoryUpdateRefused(f"not a memory update: {exc!r}") from None


def _names(doc: Any) -> frozenset[str]:
    if not isinstance(doc, list) or not all(isinstance(name, str) for name in doc):
        raise MemoryUpdateRefused(f"owned is not a list of group names: {doc!r:.80}")
    return frozenset(doc)


def _encode_memory(m: GroupMemory) -> dict[str, Any]:
    return {
        "failures": m.failures,
        "retry_at": m.retry_at,
        "last_failure": m.last_failure,
        "counters": encode_counters(m.counters),
        "in_flight": _encode_request(m.in_flight) if m.in_flight else None,
        "waiting": m.waiting,
        "job": encode_job(m.job),
        "committed": _encode_committed(m.committed) if m.committed else None,
    }


def _decode_memory(doc: dict[str, Any]) -> GroupMemory:
    flight = doc["in_flight"]
    return GroupMemory(
        doc["failures"],
        doc["retry_at"],
        doc["last_failure"],
        decode_counters(doc["counters"]),
        _decode_request(flight) if flight else None,
        doc["waiting"],
        decode_job(doc["job"]),
        _decode_committed(doc["committed"]) if doc["committed"] else None,
    )


def _encode_committed(c: CommittedOffsets) -> list[Any]:
    return [c.query_id, c.checkpoint_id, to_json(c.offsets), c.at]


def _decode_committed(doc: list[Any]) -> CommittedOffsets:
    query_id, checkpoint_id, offsets, at = doc
    return CommittedOffsets(str(query_id), int(checkpoint_id), from_json(offsets), float(at))


def _encode_request(r: CommitRequest) -> dict[str, Any]:
    c = r.checkpoint
    return {
        "checkpoint": [c.query_id, c.group_id, c.checkpoint_id, c.run_id, c.created_at],
        "checkpoint_offsets": to_json(c.offsets),
        "offsets": to_json(r.offsets),
        "attempt": r.attempt,
        "held_back": [[tp.topic, tp.partition] for tp in r.held_back],
        "rewind": r.rewind,
        "refresh": r.refresh,
        "fence": r.fence,
        "cluster": r.cluster,
    }


def _decode_request(doc: dict[str, Any]) -> CommitRequest:
    query_id, group_id, checkpoint_id, run_id, created_at = doc["checkpoint"]
    checkpoint = Checkpoint(
        query_id, group_id, checkpoint_id, run_id, from_json(doc["checkpoint_offsets"]), created_at
    )
    return CommitRequest(
        checkpoint,
        from_json(doc["offsets"]),
        doc["attempt"],
        tuple(shared_partition(t, p) for t, p in doc["held_back"]),
        doc["rewind"],
        doc["refresh"],
        doc["fence"],
        doc["cluster"],
    )
