"""Read the brokers' log-end offsets: the ``LogEndReader`` port, aiokafka's implementation
and an in-memory one for tests.

Facts this relies on (aiokafka 0.14, read in source): ``AIOKafkaConsumer.end_offsets`` sends
ListOffsets(latest) to each partition's leader and needs no group and no assignment; a
partition of a topic that does not exist is retried until the timeout, so one deleted topic
would fail the whole read. A failed read is therefore repeated topic by topic, and only the
topics that fail are missing from the answer (``LogEnds.failed_topics``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import KafkaError

from service.errors import KafkaReadError
from service.offsets import TopicPartition


@dataclass(frozen=True)
class LogEnds:
    ends: dict[TopicPartition, int]
    failed_topics: tuple[str, ...] = ()


class LogEndReader(Protocol):
    async def log_ends(self, partitions: Collection[TopicPartition]) -> LogEnds:
        """The log end of each partition; raises ``KafkaReadError`` when no topic could be
        read at all."""

    async def close(self) -> None: ...


class KafkaLogEndReader:
    """One consumer without a group, started on first use and kept."""

    def __init__(self, client_options: Mapping[str, Any], *, timeout: float) -> None:
        """``client_options``: aiokafka's connection keywords (``kafka_client_options``)."""
        self.client_options = dict(client_options)
        self.timeout = timeout
        self._consumer: AIOKafkaConsumer | None = None

    async def log_ends(self, partitions: Collection[TopicPartition]) -> LogEnds:
        if not partitions:
            return LogEnds({})
        try:
            return LogEnds(await self._read(partitions))
        except (KafkaError, TimeoutError, OSError) as whole:
            by_topic: defaultdict[str, list[TopicPartition]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp)
            if len(by_topic) == 1:
                raise KafkaReadError(f"reading log-end offsets failed: {whole!r}") from whole
        answers = await asyncio.gather(
            *(self._read(tps) for tps in by_topic.values()), return_exceptions=True
        )
        ends: dict[TopicPartition, int] = {}
        failed: list[str] = []
        for topic, answer in zip(by_topic, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, KafkaError | TimeoutError | OSError):
                    raise answer
                failed.append(topic)
            else:
                ends.update(answer)
        if not ends:
            raise KafkaReadError(f"reading log-end offsets failed for {', '.join(failed)}")
        return LogEnds(ends, tuple(sorted(failed)))

    async def _read(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        consumer = await self._started()
        async with asyncio.timeout(self.timeout):
            answer = await consumer.end_offsets([KafkaTopicPartition(*tp) for tp in partitions])
        return {TopicPartition(tp.topic, tp.partition): end for tp, end in answer.items()}

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                **self.client_options,
                group_id=None,
                enable_auto_commit=False,
                request_timeout_ms=int(self.timeout * 1000),
            )
            try:
                async with asyncio.timeout(self.timeout):
                    await consumer.start()
            except BaseException:
                with contextlib.suppress(Exception):
                    await consumer.stop()
                raise
            self._consumer = consumer
        return self._consumer

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()


@dataclass
class InMemoryLogEnds:
    """Log ends set by the test; ``fail_with`` makes every read fail."""

    ends: dict[TopicPartition, int] = field(default_factory=dict)
    fail_with: KafkaReadError | None = None
    reads: int = 0

    async def log_ends(self, partitions: Collection[TopicPartition]) -> LogEnds:
        self.reads += 1
        if self.fail_with is not None:
            raise self.fail_with
        known = {tp: self.ends[tp] for tp in partitions if tp in self.ends}
        missing = sorted({tp.topic for tp in partitions if tp not in self.ends})
        return LogEnds(known, tuple(missing))

    async def close(self) -> None:
        return None
