"""OffsetCommit requests encoded by hand, for the committer's hot path.

aiokafka encodes requests through its generic ``Struct``/``Schema`` machinery, one Python
call per field: for one group's commit of 8 partitions that is most of the committer's
CPU per commit (bench/README.md, issue 18). The OffsetCommit request the committer sends
has a fixed shape (generation -1, no member id, broker-default retention: v2 and v3 share
it), so here it is packed with ``struct`` in one pass.

Invariants
  - Byte for byte what aiokafka's ``OffsetCommitRequest`` encodes for the same arguments
    and broker versions, header included (``tests/adapters/test_offset_commit_wire.py``
    compares them on generated requests).
  - The version is chosen as aiokafka chooses it (the highest of v2/v3 the broker
    supports), so the answer is decoded by aiokafka's own response type.
"""

from __future__ import annotations

import struct
from typing import Any

from aiokafka.errors import IncompatibleBrokerVersion
from aiokafka.protocol.commit import OffsetCommitRequest_v2, OffsetCommitRequest_v3

GENERATION = -1  # a commit from outside the group (no member)
RETENTION = -1  # the broker's offsets.retention.minutes
_I16 = struct.Struct(">h")
_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_FIXED = struct.Struct(">ihqi")  # generation, member id length (0), retention, topics
_PARTITION = struct.Struct(">iqh")  # partition, offset, metadata length


def _string(value: str) -> bytes:
    encoded = value.encode()
    return _I16.pack(len(encoded)) + encoded


def encode_body(group: str, topics: list[tuple[str, list[tuple[int, int, str]]]]) -> bytes:
    """The request body: the group, then per topic its partitions (id, offset, metadata)."""
    parts = [_string(group), _FIXED.pack(GENERATION, 0, RETENTION, len(topics))]
    for topic, partitions in topics:
        parts.append(_string(topic))
        parts.append(len(partitions).to_bytes(4, "big", signed=True))
        for partition, offset, metadata in partitions:
            encoded = metadata.encode()
            parts.append(_PARTITION.pack(partition, offset, len(encoded)))
            parts.append(encoded)
    return b"".join(parts)


class _Header:
    __slots__ = ("_bytes",)

    def __init__(self, api_version: int, correlation_id: int, client_id: str) -> None:
        encoded = client_id.encode()
        self._bytes = _HEADER.pack(8, api_version, correlation_id, len(encoded)) + encoded

    def encode(self) -> bytes:
        return self._bytes


class _Encoded:
    """What ``AIOKafkaConnection.send`` needs of a prepared request: its header, its body,
    and (from the aiokafka class it stands for) how to read the answer."""

    _body: bytes

    def build_request_header(self, correlation_id: int, client_id: str) -> _Header:
        return _Header(self.API_VERSION, correlation_id, client_id)  # type: ignore[attr-defined]

    def encode(self) -> bytes:
        return self._body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self._body)} bytes)"


class _EncodedV2(_Encoded, OffsetCommitRequest_v2):  # type: ignore[misc]
    def __init__(self, body: bytes) -> None:  # aiokafka's fields are not kept
        self._body = body


class _EncodedV3(_Encoded, OffsetCommitRequest_v3):  # type: ignore[misc]
    def __init__(self, body: bytes) -> None:
        self._body = body


class OffsetCommit:
    """One group's commit, to ``AIOKafkaConnection.send`` in place of aiokafka's
    ``OffsetCommitRequest(group, -1, "", -1, topics)``."""

    API_KEY = 8

    def __init__(self, group: str, topics: list[tuple[str, list[tuple[int, int, str]]]]) -> None:
        self._body = encode_body(group, topics)

    def prepare(self, versions: dict[int, tuple[int, int]]) -> Any:
        low, high = versions.get(self.API_KEY, (-1, -1))
        for encoded in (_EncodedV3, _EncodedV2):
            if low <= encoded.API_VERSION <= high:
                return encoded(self._body)
        raise IncompatibleBrokerVersion(
            f"the broker supports OffsetCommit v{low}-v{high}; the committer sends v2 or v3"
        )
