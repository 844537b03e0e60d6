"""OffsetCommit requests encoded, and their answers decoded, by hand, for the committer's
hot path.

aiokafka encodes requests and decodes responses through its generic ``Struct``/``Schema``
machinery, one Python call per field: for one group's commit of 8 partitions that was most
of the committer's CPU per commit (docs/decisions.md, "OffsetCommit packed by hand"). The
OffsetCommit request the committer sends has a fixed shape (generation -1, no member id,
broker-default retention: v2 and v3 share it), so here it is packed with ``struct`` in one
pass; its answer (per topic, each partition's error code; v3 adds a throttle time before
them) is read the same way.

Invariants
  - Byte for byte what aiokafka's ``OffsetCommitRequest`` encodes for the same arguments
    and broker versions, header included (``tests/adapters/test_offset_commit_wire.py``
    compares them on generated requests).
  - The version is chosen as aiokafka chooses it (the highest of v2/v3 the broker
    supports), and an answer decodes to the same ``topics`` as aiokafka's response type
    of that version gives (the test compares them on generated answers).
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

from aiokafka.errors import IncompatibleBrokerVersion
from aiokafka.protocol.commit import OffsetCommitRequest_v2, OffsetCommitRequest_v3

GENERATION = -1  # a commit from outside the group (no member)
RETENTION = -1  # the broker's offsets.retention.minutes
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_ANSWER = struct.Struct(">ih")  # partition, error code
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


Topics = list[tuple[str | None, list[tuple[int, int]] | None]] | None


class Answer:
    """An OffsetCommit answer: ``topics`` as aiokafka's response has them (a list of
    ``(topic, [(partition, error_code), ...])``; None where the wire says null)."""

    __slots__ = ("topics",)

    def __init__(self, topics: Topics) -> None:
        self.topics = topics

    def __repr__(self) -> str:
        return f"OffsetCommitAnswer(topics={self.topics!r})"


class _AnswerReader:
    """``RESPONSE_TYPE`` of a prepared request: ``AIOKafkaConnection`` calls its
    ``decode`` on the answer's body (after the response header)."""

    def __init__(self, throttle_time: bool) -> None:
        self.skip = 4 if throttle_time else 0  # v3: throttle_time_ms comes first

    def decode(self, buffer: BytesIO) -> Answer:
        data = buffer.read()
        topic_count, at = _read(_I32, data, self.skip)
        if topic_count == -1:
            return Answer(None)
        topics: list[tuple[str | None, list[tuple[int, int]] | None]] = []
        for _ in range(topic_count):
            length, at = _read(_I16, data, at)
            topic: str | None = None
            if length >= 0:
                if len(data) < at + length:
                    raise ValueError("Buffer underrun decoding string")
                topic, at = data[at : at + length].decode(), at + length
            count, at = _read(_I32, data, at)
            if count == -1:
                topics.append((topic, None))
                continue
            end = at + _PARTITION_ANSWER.size * max(count, 0)
            if len(data) < end:
                raise ValueError("Buffer underrun decoding an OffsetCommit answer")
            topics.append((topic, list(_PARTITION_ANSWER.iter_unpack(data[at:end]))))
            at = end
        return Answer(topics)


def _read(field: struct.Struct, data: bytes, at: int) -> tuple[int, int]:
    if len(data) < at + field.size:
        raise ValueError("Buffer underrun decoding an OffsetCommit answer")
    (value,) = field.unpack_from(data, at)
    return value, at + field.size


class _Encoded:
    """What ``AIOKafkaConnection.send`` needs of a prepared request: its header, its body,
    and how to read the answer (the rest, e.g. the response header's parsing, from the
    aiokafka class it stands for)."""

    _body: bytes

    def build_request_header(self, correlation_id: int, client_id: str) -> _Header:
        return _Header(self.API_VERSION, correlation_id, client_id)  # type: ignore[attr-defined]

    def encode(self) -> bytes:
        return self._body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self._body)} bytes)"


class _EncodedV2(_Encoded, OffsetCommitRequest_v2):  # type: ignore[misc]
    RESPONSE_TYPE = _AnswerReader(throttle_time=False)

    def __init__(self, body: bytes) -> None:  # aiokafka's fields are not kept
        self._body = body


class _EncodedV3(_Encoded, OffsetCommitRequest_v3):  # type: ignore[misc]
    RESPONSE_TYPE = _AnswerReader(throttle_time=True)

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
