"""The one door below aiokafka's public API: every use of what aiokafka does not document
(its cluster client, its connections, its protocol classes, the admin client's
``_send_request``, its OAUTHBEARER authenticator) is here; the rest of the service uses
aiokafka's documented API and this module's small classes and functions. It imports
aiokafka and the standard library only, so that ``tests/e2e/test_aiokafka_contract.py``
runs it against the newest aiokafka and every supported Kafka version (docs/decisions.md,
"Kafka through one door"); ``stubs/aiokafka`` types exactly what is used here.

- ``Client``: aiokafka's cluster client, started: coordinator look-ups, Metadata and
  ListOffsets to a given broker. Metadata never creates a topic: aiokafka's
  ``MetadataRequest`` (v4+), the consumer's ``end_offsets`` and the admin client's
  ``describe_topics`` allow auto-creation, and on a broker with
  ``auto.create.topics.enable`` (Kafka's default) a lag read would bring a deleted topic back.
- ``Lane``: a connection of the service's own to one broker, for the committer's commits.
- ``committed``, ``describe_group``, ``topic_metadata``: through an admin client.
  aiokafka's ``list_consumer_group_offsets`` ignores OffsetFetch's top-level error code
  (v2+), so a coordinator still loading would read as "no offsets": ``committed`` raises it.
- ``OffsetCommit``: packed with ``struct`` in one pass, its answer read the same way
  (docs/decisions.md, "OffsetCommit packed by hand"): one fixed shape (generation -1, no
  member id, broker-default retention: v2 and v3 share it), byte for byte what aiokafka
  encodes, the version chosen as aiokafka chooses it (tests/adapters/test_kafka_wire.py).
- ``refuse_oauth_error_challenge``: a broker that refuses a token answers with a JSON error
  as its challenge (RFC 7628 3.2.2) and waits for the client to end the exchange; aiokafka
  0.14 ignores it and takes the connection for authenticated. Our authenticator raises
  ``SaslAuthenticationFailed`` with the broker's words and tells the token provider
  (``forget``). aiokafka's clients make every connection with the module-level
  ``create_conn`` and its connection's ``authenticator_oauth``, with no hook for another:
  ours is installed there when an OAUTHBEARER client's options are made, never at import.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any, cast

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.conn import AIOKafkaConnection, OAuthAuthenticator, create_conn
from aiokafka.errors import (
    IncompatibleBrokerVersion,
    NodeNotReadyError,
    NoError,
    SaslAuthenticationFailed,
    for_code,
)
from aiokafka.protocol.admin import DescribeGroupsRequest
from aiokafka.protocol.commit import (
    OffsetCommitRequest_v2,
    OffsetCommitRequest_v3,
    OffsetFetchRequest,
)
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.offset import OffsetRequest

# What sends on a connection sends again, up to RESENDS times, after the broker closed it
# under its request (an OAUTHBEARER token expired: ``oauth``). Connections opened together
# carry one token and expire together: a request may meet more than one closed connection
# on its way (the coordinator look-up's, its own).
RESENDS = 3
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


@dataclass(slots=True)
class OffsetCommitAnswer:
    """An OffsetCommit answer: ``topics`` as aiokafka's response has them (a list of
    ``(topic, [(partition, error_code), ...])``; None where the wire says null)."""

    topics: Topics


class _AnswerReader:
    """``RESPONSE_TYPE`` of a prepared request: ``AIOKafkaConnection`` calls its
    ``decode`` on the answer's body (after the response header)."""

    def __init__(self, throttle_time: bool) -> None:
        self.skip = 4 if throttle_time else 0  # v3: throttle_time_ms comes first

    def decode(self, buffer: BytesIO) -> OffsetCommitAnswer:
        data = buffer.read()
        topic_count, at = _read(_I32, data, self.skip)
        if topic_count == -1:
            return OffsetCommitAnswer(None)
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
        return OffsetCommitAnswer(topics)


def _read(field: struct.Struct, data: bytes, at: int) -> tuple[int, int]:
    if len(data) < at + field.size:
        raise ValueError("Buffer underrun decoding an OffsetCommit answer")
    (value,) = field.unpack_from(data, at)
    return value, at + field.size


class _Encoded:
    """What ``AIOKafkaConnection.send`` needs of a prepared request: its header, its body,
    and how to read the answer (the rest, e.g. the response header's parsing, from the
    aiokafka class it stands for)."""

    def __init__(self, body: bytes) -> None:  # aiokafka's fields are not kept
        self._body = body

    def build_request_header(self, correlation_id: int, client_id: str) -> _Header:
        return _Header(self.API_VERSION, correlation_id, client_id)  # type: ignore[attr-defined]

    def encode(self) -> bytes:
        return self._body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self._body)} bytes)"


class _EncodedV2(_Encoded, OffsetCommitRequest_v2):
    RESPONSE_TYPE = _AnswerReader(throttle_time=False)


class _EncodedV3(_Encoded, OffsetCommitRequest_v3):
    RESPONSE_TYPE = _AnswerReader(throttle_time=True)


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


# What a connection of the service's own takes of the clients' options.
CONNECTION_KEYS = (
    "client_id",
    "ssl_context",
    "security_protocol",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
    "sasl_oauth_token_provider",
)
# A partition's offsets, as ListOffsets answers them: topic, [(partition, error, offset)].
Offsets = list[tuple[str, list[tuple[int, int, int]]]]


class Lane:
    """A connection of the service's own to one broker (``create_conn``)."""

    def __init__(self, connection: AIOKafkaConnection) -> None:
        self._connection = connection

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        options: Mapping[str, Any],
        request_timeout_ms: int | None = None,
    ) -> Lane:
        """Connected (and authenticated) with the clients' ``options``; raises what
        connecting raises (refused credentials, TLS, an unreachable broker)."""
        keywords = {k: options[k] for k in CONNECTION_KEYS if k in options}
        if request_timeout_ms is not None:
            keywords["request_timeout_ms"] = request_timeout_ms
        return cls(await create_conn(host, port, **keywords))

    async def commit(self, message: OffsetCommit) -> OffsetCommitAnswer:
        return cast(OffsetCommitAnswer, await self._connection.send(message))

    def connected(self) -> bool:
        return bool(self._connection.connected())

    def close(self) -> None:
        self._connection.close()


class Client:
    """aiokafka's cluster client, started: one per reader or committer, kept."""

    def __init__(self, client: AIOKafkaClient) -> None:
        self._client = client

    @classmethod
    async def started(cls, options: Mapping[str, Any], request_timeout_ms: int) -> Client:
        """Bootstrapped from ``options`` (``kafka_client_options``); closed again when
        that fails."""
        client = AIOKafkaClient(**options, request_timeout_ms=request_timeout_ms)
        try:
            await client.bootstrap()
        except BaseException:
            with contextlib.suppress(Exception):
                await client.close()
            raise
        return cls(client)

    def broker(self, node: int) -> tuple[str, int] | None:
        """Where ``node`` listens, as the client's metadata has it (None: not in it)."""
        broker = self._client.cluster.broker_metadata(node)
        return None if broker is None else (broker.host, broker.port)

    def refresh(self) -> None:
        """Ask for new metadata soon (a broker moved or died)."""
        self._client.force_metadata_update()

    async def find_coordinator(self, group: str) -> tuple[int, str, int]:
        """The group's coordinator (node, host, port), asked of a random broker (as
        aiokafka's own look-up does); raises Kafka's answer when it is an error."""
        asked = self._client.get_random_node()
        if asked is None:
            raise NodeNotReadyError("no broker is known")
        answer = await self._client.send(
            asked, FindCoordinatorRequest(group, CoordinationType.GROUP)
        )
        _raise_for(answer.error_code)
        return int(answer.coordinator_id), str(answer.host), int(answer.port)

    async def metadata(self, topics: Iterable[str], node: int | None = None) -> list[Any]:
        """Each topic's metadata (``to_object`` dicts: ``error_code``, ``partitions`` with
        ``partition`` and ``leader``), asked of ``node`` (default: a random broker)."""
        asked = self._client.get_random_node() if node is None else node
        return _topics(await self._client.send(asked, _metadata_request(topics)))

    async def list_offsets(
        self, leader: int, partitions: Mapping[str, Sequence[int]], timestamp: int
    ) -> Offsets:
        """ListOffsets(``timestamp``: -1 the log end, -2 its start) of ``partitions``, all
        led by ``leader``."""
        request = OffsetRequest(
            -1, 0, [(t, [(p, timestamp) for p in ps]) for t, ps in partitions.items()]
        )
        answer = await self._client.send(leader, request)
        return [
            (topic, [(partition, error, rest[-1]) for partition, error, *rest in rows])
            for topic, rows in answer.topics
        ]

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._client.close()


async def committed(
    admin: AIOKafkaAdminClient, node: int, group: str
) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    """The group's committed offsets (OffsetFetch for all partitions, to its coordinator
    ``node``): per topic, (partition, offset, metadata); raises the answer's top-level or
    a partition's error."""
    response = await admin._send_request(OffsetFetchRequest(group, None), node)
    _raise_for(getattr(response, "error_code", 0))
    found = []
    for topic, partitions in response.topics:
        rows = []
        for partition, offset, metadata, error_code in partitions:
            _raise_for(error_code)
            rows.append((partition, offset, metadata))
        found.append((topic, rows))
    return found


async def describe_group(admin: AIOKafkaAdminClient, node: int, group: str) -> tuple[str, int]:
    """The group's state (Kafka's word, "" when it has none) and number of members,
    asked of its coordinator ``node`` (DescribeGroups); ("Dead", 0) when not answered."""
    response = await admin._send_request(DescribeGroupsRequest([group]), node)
    for described in response.groups:
        error_code, name, state, _protocol_type, _protocol, members, *_ = described
        if name == group:
            _raise_for(error_code)
            return str(state), len(members)
    return "Dead", 0


async def topic_metadata(admin: AIOKafkaAdminClient, topics: Iterable[str]) -> list[Any]:
    """As ``Client.metadata``, through an admin client."""
    return _topics(await admin._send_request(_metadata_request(topics)))


def _metadata_request(topics: Iterable[str]) -> MetadataRequest:
    return MetadataRequest(sorted(topics), allow_auto_topic_creation=False)


def _topics(response: Any) -> list[Any]:
    topics: list[Any] = response.to_object()["topics"]
    for topic in topics:  # v0-v9 say "topic", later versions "name"
        topic.setdefault("topic", topic.get("name"))
    return topics


def _raise_for(error_code: int) -> None:
    error = for_code(error_code)
    if error is not NoError:
        raise error()


class RefusingOAuthAuthenticator(OAuthAuthenticator):
    """aiokafka's OAUTHBEARER exchange, where a challenge after the token is the broker's
    refusal (a success carries none), raised as ``SaslAuthenticationFailed``."""

    async def step(self, payload: bytes | None) -> tuple[bytes, bool] | None:
        if self._token_sent and payload:
            said = payload.decode("utf-8", "replace")[:300]
            refusal = f"the broker refused the OAUTHBEARER token: {said}"
            forget = getattr(self._sasl_oauth_token_provider, "forget", None)
            if callable(forget):  # ``oauth.RenewedTokens``: the next connection asks anew
                forget(refusal)
            raise SaslAuthenticationFailed(refusal)
        return await super().step(payload)


def _refusing_authenticator(connection: AIOKafkaConnection) -> OAuthAuthenticator:
    return RefusingOAuthAuthenticator(
        sasl_oauth_token_provider=connection._sasl_oauth_token_provider
    )


def refuse_oauth_error_challenge() -> None:
    """Make aiokafka's connections use ``RefusingOAuthAuthenticator`` (idempotent; see the
    module's docstring for why there and not on a connection of our own)."""
    AIOKafkaConnection.authenticator_oauth = _refusing_authenticator
