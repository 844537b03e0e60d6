"""Read the timestamps of records at given offsets: aiokafka's implementation of the
``RecordTimeReader`` port.

One consumer without a group, kept between reads: each read assigns the partitions, seeks
each to its offset and takes the first record at or after it, then unassigns them all so
that nothing is fetched between reads. A partition's fetch is capped at
``MAX_PARTITION_BYTES`` (Kafka still returns one whole batch, KIP-74): about one batch per
partition. An offset below the log start reads the oldest record kept; a partition whose
record did not arrive within ``timeout`` is left out of the answer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import KafkaError

from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import KafkaReadError

POLL_MS = 100
MAX_PARTITION_BYTES = 16_384  # a partition's fetch: about one batch (see above)


class KafkaRecordTimeReader:
    def __init__(self, client_options: Mapping[str, Any], *, timeout: float) -> None:
        self.client_options = dict(client_options)
        self.timeout = timeout
        self._consumer: AIOKafkaConsumer | None = None
        self.records_read = 0  # records handed back by the fetcher, in all

    async def record_times(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, float | None]:
        if not offsets:
            return {}
        wanted = {KafkaTopicPartition(tp.topic, tp.partition): o for tp, o in offsets.items()}
        found: dict[TopicPartition, float | None] = {}
        try:
            consumer = await self._started()
            consumer.assign(list(wanted))
            for ktp, offset in wanted.items():
                consumer.seek(ktp, offset)
            deadline = time.monotonic() + self.timeout
            while len(found) < len(wanted) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=POLL_MS)
                for ktp, records in batches.items():
                    self.records_read += len(records)
                    tp = TopicPartition(ktp.topic, ktp.partition)
                    if tp in found:
                        continue
                    first = next((r for r in records if r.offset >= wanted[ktp]), None)
                    if first is not None:
                        found[tp] = first.timestamp / 1000.0
                        consumer.pause(ktp)
        except (KafkaError, OSError) as exc:
            await self.close()
            if not found:
                raise KafkaReadError(f"reading record timestamps failed: {exc!r}") from exc
        else:
            consumer.unsubscribe()
        return found

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                **self.client_options,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_partition_fetch_bytes=MAX_PARTITION_BYTES,
                fetch_max_wait_ms=POLL_MS,
                request_timeout_ms=int(max(self.timeout, 1) * 1000) + 1000,
            )
            try:
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
