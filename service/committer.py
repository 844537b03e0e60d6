"""Commit offsets to Kafka: the ``OffsetCommitter`` port, aiokafka's implementation, and an
in-memory one for tests of the core.

aiokafka facts this relies on (0.14, read in source):
  - ``AIOKafkaConsumer(group_id=G, enable_auto_commit=False)`` + ``assign`` + ``commit``
    commits with generation -1 and never joins the group. Auto-commit (on by default)
    would commit fetch positions, so it is off; assigned partitions are paused.
  - The broker accepts such commits only while the group has no members; otherwise the
    commit fails with UNKNOWN_MEMBER_ID, raised as ``CommitFailedError`` (cause in
    ``__cause__``).
  - Retriable errors are retried forever inside ``commit``, and the request itself runs
    under ``asyncio.shield``: cancelling the caller does not cancel a request already sent.
    So every commit is bounded by a timeout, and after any failure the group's consumer
    is closed before the next commit can start -- a late answer to an old commit must
    never land after a newer one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka import errors as kafka_errors
from aiokafka.conn import create_conn

from service.changes import CommitRequest
from service.errors import (
    AuthenticationFailed,
    BrokerUnavailable,
    CommitError,
    CommitTimeout,
    GroupHasMembers,
    NotAuthorized,
    TlsFailed,
    UnknownTopicPartition,
)

log = logging.getLogger(__name__)
METADATA_LIMIT = 4096


class OffsetCommitter(Protocol):
    async def commit(self, request: CommitRequest) -> None:
        """Commit ``request.offsets`` for ``request.group_id`` or raise ``CommitError``."""

    async def close(self) -> None: ...


def commit_metadata(request: CommitRequest) -> str:
    """What lag tools show beside the offset: who committed it, for which batch."""
    text = json.dumps(
        {
            "committer": "spark-offset-sidecar",
            "query_id": request.query_id,
            "batch_id": request.checkpoint_id,
        },
        separators=(",", ":"),
    )
    return text[:METADATA_LIMIT]


class KafkaOffsetCommitter:
    """One paused, never-joining consumer per group (kept for the next commit, at most
    ``max_consumers`` of them, least recently used closed first).

    The consumer closed to make room is never one in use: a commit moves its consumer to
    the recent end, and ``max_consumers`` exceeds the commit loop's concurrency (64)."""

    def __init__(
        self,
        client_options: Mapping[str, Any],
        *,
        timeout: float,
        max_consumers: int = 256,
    ) -> None:
        """``client_options``: aiokafka's connection keywords (``kafka_client_options``)."""
        self.client_options = dict(client_options)
        self.timeout = timeout
        self.max_consumers = max_consumers
        self._consumers: OrderedDict[str, AIOKafkaConsumer] = OrderedDict()

    async def commit(self, request: CommitRequest) -> None:
        group = request.group_id
        metadata = commit_metadata(request)
        offsets = {
            TopicPartition(tp.topic, tp.partition): (offset, metadata)
            for tp, offset in request.offsets.items()
        }
        try:
            async with asyncio.timeout(self.timeout):
                consumer = await self._consumer_for(group, set(offsets))
                await consumer.commit(offsets)
        except BaseException as exc:
            await self._discard(group)
            if isinstance(exc, asyncio.CancelledError):
                raise
            if isinstance(exc, kafka_errors.KafkaConnectionError):
                exc = await self._why_unreachable() or exc
            raise _commit_error(exc, group, self.timeout) from exc

    async def _consumer_for(self, group: str, tps: set[TopicPartition]) -> AIOKafkaConsumer:
        consumer = self._consumers.get(group)
        if consumer is None:
            while len(self._consumers) >= self.max_consumers:
                _, oldest = self._consumers.popitem(last=False)
                await oldest.stop()
            consumer = AIOKafkaConsumer(
                **self.client_options,
                group_id=group,
                enable_auto_commit=False,
                request_timeout_ms=max(1000, int(self.timeout * 1000)),
            )
            self._consumers[group] = consumer
            await consumer.start()
        self._consumers.move_to_end(group)
        assigned = consumer.assignment()
        if not tps <= assigned:
            wanted = assigned | tps
            consumer.assign(list(wanted))
            consumer.pause(*wanted)
        return consumer

    async def _why_unreachable(self) -> BaseException | None:
        """aiokafka reports refused credentials or an untrusted certificate only as "unable
        to bootstrap" (the cause goes to its log). One direct connection with the same
        settings raises the real error, so the failure reason can name it."""
        host, _, port = self.client_options["bootstrap_servers"].split(",")[0].rpartition(":")
        keys = (
            "client_id",
            "ssl_context",
            "security_protocol",
            "sasl_mechanism",
            "sasl_plain_username",
            "sasl_plain_password",
        )
        options = {k: self.client_options[k] for k in keys if k in self.client_options}
        try:
            async with asyncio.timeout(self.timeout):
                connection = await create_conn(host, int(port), **options)
            connection.close()
        except (kafka_errors.SaslAuthenticationFailed, ssl.SSLError) as exc:
            return exc
        except Exception:
            return None
        return None

    async def _discard(self, group: str) -> None:
        consumer = self._consumers.pop(group, None)
        if consumer is None:
            return
        try:
            async with asyncio.timeout(self.timeout):
                await consumer.stop()
        except Exception:
            log.warning("closing the consumer of group %s failed", group, exc_info=True)

    async def close(self) -> None:
        for group in list(self._consumers):
            await self._discard(group)


def _commit_error(exc: BaseException, group: str, timeout: float) -> CommitError:
    if isinstance(exc, TimeoutError):
        return CommitTimeout(f"no answer from Kafka within {timeout:g} s")
    if isinstance(exc, kafka_errors.CommitFailedError):
        cause = type(exc.__cause__).__name__ if exc.__cause__ else "CommitFailedError"
        return GroupHasMembers(
            f"group {group!r} has active members ({cause}): a consumer is using this "
            "group id, so the broker refuses commits from outside the group"
        )
    if isinstance(exc, kafka_errors.SaslAuthenticationFailed):
        return AuthenticationFailed(f"Kafka refused the SASL credentials: {exc}")
    if isinstance(exc, ssl.SSLError):
        return TlsFailed(f"TLS with Kafka failed: {exc}")
    if isinstance(
        exc,
        (kafka_errors.GroupAuthorizationFailedError, kafka_errors.TopicAuthorizationFailedError),
    ):
        return NotAuthorized(f"Kafka refused the commit: {exc}")
    if isinstance(exc, kafka_errors.UnknownTopicOrPartitionError):
        return UnknownTopicPartition(f"Kafka does not know a committed partition: {exc}")
    if isinstance(exc, (kafka_errors.KafkaConnectionError, kafka_errors.NodeNotReadyError)):
        return BrokerUnavailable(f"cannot reach Kafka: {exc}")
    if isinstance(exc, kafka_errors.KafkaError):
        return CommitError(f"{type(exc).__name__}: {exc}")
    return CommitError(f"unexpected {type(exc).__name__}: {exc}")


class InMemoryCommitter:
    """Records commits; can be told to fail or to hold commits until released."""

    def __init__(self) -> None:
        self.commits: list[CommitRequest] = []
        self.fail_with: CommitError | None = None
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_flight = 0
        self.max_in_flight = 0

    async def commit(self, request: CommitRequest) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self.fail_with is not None:
                raise self.fail_with
            self.commits.append(request)
        finally:
            self.in_flight -= 1

    async def close(self) -> None:
        self.gate.set()
