"""Commit offsets to Kafka: aiokafka's implementation of the ``OffsetCommitter`` port.

Each commit is a plain OffsetCommit (generation -1, no member id: a commit from outside
the group, accepted only while it has no members; encoded by ``wire``) sent to the
group's coordinator over one of a fixed set of *lanes* (connections). A group always
uses the same lane, so its commits arrive in order; a lane carries the groups of one
partition of ``__consumer_offsets`` only, so a dead broker delays only the groups it
holds (docs/decisions.md, "Commit lanes", with the Kafka facts this relies on).
Coordinators are looked up by the shared ``wire.Client`` and a lane connects to the
address the answer names: during a rolling restart the coordinators move to a broker that
has just come back before the client's metadata lists it. A lane is kept after a
timeout (its answer may still come, in order) and replaced only once its connection is
broken."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import zlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka import errors as kafka_errors

from spark_offset_sidecar.adapters.kafka import offsets_topic, wire
from spark_offset_sidecar.adapters.kafka.unreachable_brokers import UnreachableBrokers
from spark_offset_sidecar.adapters.kafka.wire import RESENDS, Client, Lane, OffsetCommit
from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.ledger.changes import CommitRequest
from spark_offset_sidecar.errors import (
    AuthenticationFailed,
    BrokerUnavailable,
    CommitError,
    CommitTimeout,
    CoordinatorNotAvailable,
    GroupHasMembers,
    NotAuthorized,
    TlsFailed,
    TokenUnavailable,
    UnknownTopicPartition,
)

log = logging.getLogger(__name__)
METADATA_LIMIT = 4096
_ASK_AGAIN = (
    kafka_errors.NotCoordinatorForGroupError,
    kafka_errors.GroupCoordinatorNotAvailableError,
    kafka_errors.GroupLoadInProgressError,
)
# The coordinator, or the broker asked for it, cannot be reached: look it up again.
_UNREACHABLE = (ConnectionError, kafka_errors.NodeNotReadyError)
# Seconds between look-ups of a dead broker's groups, and after an "ask again" answer.
UNREACHABLE_BACKOFF = Backoff(initial=0.1, cap=0.5)
ASK_AGAIN_WAIT = 0.1
_MEMBERS = (
    kafka_errors.UnknownMemberIdError,
    kafka_errors.IllegalGenerationError,
    kafka_errors.RebalanceInProgressError,
)


def commit_metadata(request: CommitRequest, replica_id: str | None = None) -> str:
    """What lag tools show beside the offset: who committed it, for which batch (and with
    replicas, which replica under which owner epoch)."""
    fields: dict[str, Any] = {
        "committer": "spark-offset-sidecar",
        "query_id": request.query_id,
        "batch_id": request.checkpoint_id,
    }
    if replica_id is not None:
        fields.update(replica=replica_id, epoch=request.fence)
    text = json.dumps(fields, separators=(",", ":"))
    return text[:METADATA_LIMIT]


class KafkaOffsetCommitter:
    """Commits for every group over ``lanes`` connections per coordinator (see above)."""

    def __init__(
        self,
        client_options: Mapping[str, Any],
        *,
        timeout: float,
        lanes: int = 16,
        replica_id: str | None = None,
    ) -> None:
        """``client_options``: aiokafka's connection keywords (``kafka_client_options``);
        ``replica_id`` goes into the commit metadata when several replicas commit."""
        self.client_options = dict(client_options)
        self.replica_id = replica_id
        self.timeout = timeout
        self.lanes = lanes
        self._client: Client | None = None
        self._coordinators: dict[str, int] = {}  # group -> coordinator node id
        self._found: dict[int, tuple[str, int]] = {}  # node id -> address, as last named
        # Partitions of __consumer_offsets: learnt once, before the first commit is sent
        # (a group's lane never changes, see above); 1 when Kafka does not tell.
        self._offsets_partitions: int | None = None
        self._connections: dict[tuple[int, int], Lane] = {}  # (node, lane)
        self._connecting: dict[tuple[int, int], asyncio.Lock] = defaultdict(asyncio.Lock)
        # Why commits fail for every group alike (Kafka refusing the credentials, no token,
        # TLS), until a commit succeeds again; shown on /readyz and /ui.
        self.credentials_problem: str | None = None
        self.unreachable = UnreachableBrokers()
        self.resent = 0  # commits sent again after the broker closed their connection

    @property
    def problem(self) -> str | None:
        """What keeps commits from Kafka now, in one sentence (``/readyz``, ``/ui``)."""
        return self.credentials_problem or self.unreachable.problem(time.monotonic())

    def waiting(self, group_id: str) -> str | None:
        return self.unreachable.waiting_on(group_id, time.monotonic())

    async def commit(self, request: CommitRequest) -> None:
        group = request.group_id
        metadata = commit_metadata(request, self.replica_id)
        by_topic: defaultdict[str, list[tuple[int, int, str]]] = defaultdict(list)
        for tp, offset in sorted(request.offsets.items()):
            by_topic[tp.topic].append((tp.partition, offset, metadata))
        message = OffsetCommit(group, list(by_topic.items()))
        tries = _Tries()
        try:
            async with asyncio.timeout(self.timeout):
                while not await self._try(group, message, tries):
                    pass
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._coordinators.pop(group, None)
            failure, cause = await self._failure(exc, group, tries)
            if isinstance(failure, AuthenticationFailed | TlsFailed):
                self.credentials_problem = str(failure)
            raise failure from cause

    async def _try(self, group: str, message: OffsetCommit, tries: _Tries) -> bool:
        """One try: True once Kafka took the commit, False to try again (it has waited
        what it should); raises what ends the commit."""
        tries.node = None
        try:
            tries.node = node = await self._coordinator(group)
            connection = await self._connection(node, await self._lane(group, node))
            error = _first_error(await connection.commit(message))
            if error is not None:
                raise error
            self.credentials_problem = None
            self.unreachable.reached(group, node, time.monotonic())
            return True
        except _ASK_AGAIN as exc:
            tries.asked_again = exc
            await asyncio.sleep(ASK_AGAIN_WAIT)
        except _UNREACHABLE as exc:
            tries.unreachable = exc
            if tries.node is not None:
                host, port = self._broker(tries.node) or ("", 0)
                address = f"{host}:{port}" if host else ""
                self.unreachable.missed(group, tries.node, address, time.monotonic())
            if self._client is not None:
                self._client.refresh()
            # Short steps: the group's new coordinator is taken as soon as Kafka names one
            # (once it has fenced the dead broker).
            tries.missed += 1
            await asyncio.sleep(UNREACHABLE_BACKOFF.delay(tries.missed))
        except kafka_errors.KafkaConnectionError:
            # The broker closed the connection under the request: with OAUTHBEARER it does
            # so once the token has expired. Again on a new connection (a new token); the
            # same offsets again are harmless and no later commit of the group can be in
            # flight.
            if not tries.resends:
                raise
            tries.resends -= 1
            self.resent += 1
        self._coordinators.pop(group, None)  # looked up again by the next try
        return False

    async def _failure(
        self, exc: BaseException, group: str, tries: _Tries
    ) -> tuple[CommitError, BaseException]:
        """The failure that ended a commit, named, and the error it comes from."""
        if isinstance(exc, TimeoutError) and tries.unreachable is not None:
            exc = tries.unreachable
        if isinstance(exc, (kafka_errors.KafkaConnectionError, *_UNREACHABLE)):
            exc = await self._why_unreachable() or exc
        if isinstance(exc, _UNREACHABLE):
            node = tries.node
            where = "its coordinator" if node is None else f"its coordinator, broker {node},"
            return BrokerUnavailable(
                f"group {group!r}: {where} could not be reached within {self.timeout:g} s "
                f"({exc}); Kafka moves the groups of a broker that "
                "died once it fences it (broker.session.timeout.ms)"
            ), exc
        if isinstance(exc, TimeoutError) and tries.asked_again is not None:
            return CoordinatorNotAvailable(
                f"group {group!r} had no coordinator within {self.timeout:g} s (Kafka "
                f"kept answering {type(tries.asked_again).__name__}; a new broker creates "
                "__consumer_offsets first); retried with backoff"
            ), exc
        return _commit_error(exc, group, self.timeout), exc

    async def _lane(self, group: str, coordinator: int) -> int:
        """The group's lane: its partition of ``__consumer_offsets``, then its place among
        ``lanes // partitions`` lanes of that partition (see above)."""
        partitions = self._offsets_partitions
        if partitions is None:
            client = await self._client_started()
            found = await offsets_topic.partition_count(client, coordinator)
            if isinstance(found, str):
                log.warning(
                    "Kafka does not say how many partitions %s has (%s): groups are not "
                    "kept apart by their partition of it, so a dead broker can delay "
                    "commits of groups it does not hold (allow Describe on the topic)",
                    offsets_topic.OFFSETS_TOPIC,
                    found,
                )
            partitions = self._offsets_partitions = found if isinstance(found, int) else 1
        per_partition = max(1, self.lanes // partitions)
        spread = zlib.crc32(group.encode()) % per_partition
        return offsets_topic.partition_for(group, partitions) * per_partition + spread

    def _broker(self, node: int) -> tuple[str, int] | None:
        """Where ``node`` listens: as the client's metadata has it, else as the look-up of a
        coordinator last named it (None: neither knows it)."""
        broker = None if self._client is None else self._client.broker(node)
        return broker if broker is not None else self._found.get(node)

    async def _client_started(self) -> Client:
        """The shared client, started on first use (and again after a failed start)."""
        if self._client is None:
            self._client = await Client.started(
                self.client_options, max(1000, int(self.timeout * 1000))
            )
        return self._client

    async def _coordinator(self, group: str) -> int:
        node = self._coordinators.get(group)
        if node is None:
            node = self._coordinators[group] = await self._find_coordinator(group)
        return node

    async def _find_coordinator(self, group: str) -> int:
        """The group's coordinator, asked of a random broker (as aiokafka's look-up does),
        its address kept from the answer."""
        client = await self._client_started()
        node, host, port = await client.find_coordinator(group)
        self._found[node] = (host, port)
        return node

    async def _connection(self, node: int, lane: int) -> Lane:
        """The lane's connection to ``node``: kept while it works, so that its requests
        stay in order; a broken one is replaced."""
        key = (node, lane)
        connection = self._connections.get(key)
        if connection is not None and connection.connected():  # most commits: no lock to take
            return connection
        async with self._connecting[key]:  # one connection made per lane at a time
            connection = self._connections.get(key)
            if connection is not None and connection.connected():
                return connection
            client = await self._client_started()
            broker = self._broker(node)
            if broker is None:
                client.refresh()
                raise kafka_errors.NodeNotReadyError(f"broker {node} is not in the metadata")
            connection = await Lane.open(
                *broker,
                self.client_options,
                # Answers are awaited under the commit's own timeout; aiokafka's must not
                # fire first (this connection is kept after a timeout, see above).
                request_timeout_ms=int(self.timeout * 1000) * 10,
            )
            self._connections[key] = connection
            return connection

    def connections(self) -> int:
        """Open lane connections (the benchmark counts all of the process's sockets)."""
        return sum(1 for c in self._connections.values() if c.connected())

    async def _why_unreachable(self) -> BaseException | None:
        """aiokafka reports refused credentials or an untrusted certificate only as "unable
        to bootstrap" (the cause goes to its log). One direct connection with the same
        settings raises the real error, so the failure reason can name it."""
        host, _, port = self.client_options["bootstrap_servers"].split(",")[0].rpartition(":")
        try:
            async with asyncio.timeout(self.timeout):
                connection = await Lane.open(host, int(port), self.client_options)
            connection.close()
        except (kafka_errors.SaslAuthenticationFailed, ssl.SSLError, TokenUnavailable) as exc:
            return exc
        except Exception:
            return None
        return None

    async def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
        client, self._client = self._client, None
        if client is not None:
            await client.close()


@dataclass
class _Tries:
    """What the tries of one commit have met so far."""

    missed: int = 0  # tries that could not reach the coordinator
    node: int | None = None  # the coordinator of the current try, once known
    asked_again: kafka_errors.KafkaError | None = None  # the last "not yet" answer
    unreachable: BaseException | None = None  # the last broker that could not be reached
    resends: int = RESENDS  # left, after the broker closed the connection under a request


def _first_error(answer: wire.OffsetCommitAnswer) -> kafka_errors.KafkaError | None:
    """The first partition error of an OffsetCommit answer, as an aiokafka error."""
    for topic, partitions in answer.topics or ():
        for partition, code in partitions or ():
            if code != 0:
                error_type = kafka_errors.for_code(code)
                return error_type(f"{topic}/{partition}")
    return None


def _commit_error(exc: BaseException, group: str, timeout: float) -> CommitError:  # noqa: PLR0911  (one reason per error)
    if isinstance(exc, TimeoutError):
        return CommitTimeout(f"no answer from Kafka within {timeout:g} s")
    if isinstance(exc, _MEMBERS):
        cause = type(exc).__name__
        return GroupHasMembers(
            f"group {group!r} has active members ({cause}): a consumer is using this "
            "group id, so the broker refuses commits from outside the group"
        )
    if isinstance(exc, kafka_errors.SaslAuthenticationFailed):
        return AuthenticationFailed(f"Kafka refused the SASL credentials: {exc}")
    if isinstance(exc, TokenUnavailable):
        return AuthenticationFailed(f"no OAUTHBEARER token for Kafka: {exc}")
    if isinstance(exc, ssl.SSLError):
        return TlsFailed(f"TLS with Kafka failed: {exc}")
    if isinstance(
        exc,
        (kafka_errors.GroupAuthorizationFailedError, kafka_errors.TopicAuthorizationFailedError),
    ):
        return NotAuthorized(f"Kafka refused the commit: {exc}")
    if isinstance(exc, kafka_errors.UnknownTopicOrPartitionError):
        return UnknownTopicPartition(f"Kafka does not know a committed partition: {exc}")
    if isinstance(exc, kafka_errors.KafkaConnectionError):
        return BrokerUnavailable(f"cannot reach Kafka: {exc}")
    if isinstance(exc, kafka_errors.KafkaError):
        return CommitError(f"{type(exc).__name__}: {exc}")
    return CommitError(f"unexpected {type(exc).__name__}: {exc}")
