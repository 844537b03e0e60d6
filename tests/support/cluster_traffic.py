"""Traffic and a witness for tests on a Kafka cluster: Spark-like checkpoints posted for many
groups at once, and each group's commits seen from outside, in Kafka, by when they changed."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import httpx
from aiokafka.admin import AIOKafkaAdminClient

from tests.support.in_thread import InThread
from tests.support.service import spark_progress, wait_for


def offsets_of(topic: str, batch: int, partitions: int) -> dict[str, dict[str, int]]:
    return {topic: {str(p): batch for p in range(partitions)}}


class Checkpoints(InThread):
    """Posts a checkpoint for every group about every ``every`` s, each group on a schedule
    of its own (as jobs do: a slow answer to one group delays none of the others; a batch
    number that grows, committed as every partition's offset); records each answer."""

    def __init__(
        self, url: str, groups: list[str], topic: str, partitions: int, every: float = 0.5
    ) -> None:
        super().__init__()
        self.url, self.groups, self.topic = url, groups, topic
        self.partitions, self.every = partitions, every
        self.batch = dict.fromkeys(groups, 0)
        self.answers: defaultdict[int, int] = defaultdict(int)  # status code -> count
        self.silent = 0.0  # the longest time without an answer to any post, once answered
        self._answered: float | None = None
        # By group, (Unix time, batch) of each checkpoint answered 200.
        self.answered: dict[str, list[tuple[float, int]]] = {g: [] for g in groups}
        self.slowest = 0.0  # the longest a post waited for its answer

    def _loop(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        await asyncio.gather(
            *(self._post(g, i / len(self.groups)) for i, g in enumerate(self.groups))
        )

    async def _post(self, group: str, phase: float) -> None:
        """The group's checkpoints, one every ``every`` s from ``phase`` of a period on, on
        a connection of its own (as each job has)."""
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            await self._posts(http, group, phase)

    async def _posts(self, http: httpx.AsyncClient, group: str, phase: float) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + phase * self.every
        while not self._stop.is_set():
            await asyncio.sleep(max(0.0, due - loop.time()))
            due += self.every
            batch = self.batch[group] + 1
            progress = spark_progress(
                batch, offsets_of(self.topic, batch, self.partitions), query=f"q-{group}"
            )
            sent = time.monotonic()
            try:
                answer = await http.post(
                    "/v1/progress", json={"group_id": group, "progress": progress}
                )
                code = answer.status_code
            except httpx.TransportError:
                code = 0
            self.answers[code] += 1
            self.slowest = max(self.slowest, time.monotonic() - sent)
            if code == 200:
                self.batch[group] = batch
                self.answered[group].append((time.time(), batch))
                now = time.monotonic()
                if self._answered is not None:
                    self.silent = max(self.silent, now - self._answered)
                self._answered = now

    def refused(self) -> dict[int, int]:
        return {code: n for code, n in self.answers.items() if code != 200}


class CommitWitness(InThread):
    """Reads every group's committed offsets from Kafka (as lag tools do) every
    ``interval`` s, all groups at once, each read bounded so that a group whose coordinator
    is dead does not hold the others; ``changes[group]`` lists (monotonic time, batch) each
    time the committed batch moved."""

    def __init__(
        self, bootstrap: str, groups: Iterable[str], interval: float = 0.2, timeout: float = 1.0
    ) -> None:
        self.bootstrap, self.groups = bootstrap, list(groups)
        self.interval, self.timeout = interval, timeout
        self.changes: dict[str, list[tuple[float, int]]] = {g: [] for g in self.groups}
        super().__init__()

    def _loop(self) -> None:
        asyncio.run(self._run())

    @staticmethod
    def now() -> float:
        """The witness's clock (the times in ``changes``)."""
        return time.monotonic()

    def batch(self, group: str) -> int:
        return self.changes[group][-1][1] if self.changes[group] else 0

    def wait_for_newest(self, posts: Checkpoints) -> None:
        """Until every group's committed batch is the last one ``posts`` had answered."""
        wait_for(
            lambda: all(self.batch(g) == posts.batch[g] for g in posts.groups),
            timeout=60,
            what="every group's newest checkpoint committed",
        )

    def committed_between(self, group: str, start: float, end: float) -> int:
        """How many times the group's commit moved within [start, end]."""
        return sum(1 for at, _ in self.changes[group] if start <= at <= end)

    def longest_without_commit(self, group: str, start: float, end: float) -> float:
        """The longest time within [start, end] in which the group's commit did not move."""
        times = [start, *(at for at, _ in self.changes[group] if start < at < end), end]
        return max(b - a for a, b in itertools.pairwise(times))

    async def _read(self, admin: AIOKafkaAdminClient, group: str) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                found = await admin.list_consumer_group_offsets(group)
        except Exception:
            return
        batches = {meta.offset for meta in found.values()}
        if len(batches) == 1:
            (batch,) = batches
            if batch != self.batch(group):
                self.changes[group].append((time.monotonic(), batch))

    async def _run(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=3000)
        await admin.start()
        try:
            while not self._stop.is_set():
                await asyncio.gather(*(self._read(admin, g) for g in self.groups))
                await asyncio.sleep(self.interval)
        finally:
            await admin.close()


class PlainCommit:
    """A group committed by a plain aiokafka consumer (no sidecar), once when started and
    once more on ``commit_now()``: ``done_at`` is when Kafka answered that second commit
    (the witness's clock), what Kafka alone does for the group."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.done_at: float | None = None
        self.error: BaseException | None = None
        self.stop_error: BaseException | None = None  # stopping the consumer: not the test's
        self._ready, self._go = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> PlainCommit:
        self._thread.start()
        if not self._ready.wait(60):
            raise AssertionError(f"{self.group}: the plain consumer's first commit: {self.error}")
        return self

    def __exit__(self, *_exc: object) -> None:
        self._go.set()
        self._thread.join(60)

    def commit_now(self) -> None:
        self._go.set()

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            enable_auto_commit=False,
            request_timeout_ms=60_000,
        )
        partition = TopicPartition(self.topic, 0)
        try:
            await consumer.start()
            consumer.assign([partition])
            await consumer.commit({partition: 1})
            self._ready.set()
            await asyncio.to_thread(self._go.wait)
            await consumer.commit({partition: 2})
            self.done_at = time.monotonic()
        except BaseException as exc:
            self.error = exc
        finally:
            try:
                await consumer.stop()
            except BaseException as exc:
                # Its coordinator's task, cancelled under it while a broker is down, can
                # raise CancelledError from stop(): kept, not raised in the thread.
                self.stop_error = exc


@dataclass(frozen=True)
class Export:
    """A group's last commit as the service exported it in one read that started at
    ``at`` (Unix time): the batch its committed offsets are (0: none or not one batch) and
    the time it gives for that commit."""

    at: float
    batch: int
    committed_at: float | None


class Exports(InThread):
    """Reads, every ``every`` s, each group's last commit as the service exports it: on
    ``/metrics`` (``sidecar_committed_offset``, which needs partition granularity, and
    ``sidecar_last_successful_commit_timestamp_seconds``) into ``metrics[group]``, and
    for ``status_groups`` on ``/v1/status/{group}`` (its partitions' offsets and
    ``last_commit_at``) into ``status[group]``."""

    def __init__(self, url: str, groups: list[str], status_groups: list[str], every: float = 0.5):
        super().__init__()
        self.url, self.groups, self.status_groups, self.every = url, groups, status_groups, every
        self.metrics: dict[str, list[Export]] = {g: [] for g in groups}
        self.status: dict[str, list[Export]] = {g: [] for g in status_groups}

    def _loop(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as http:
            while not self._stop.is_set():
                started = time.time()
                with contextlib.suppress(httpx.HTTPError):  # read again at the next turn
                    self._read(http)
                self._stop.wait(max(0.0, self.every - (time.time() - started)))

    def _read(self, http: httpx.Client) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        at = time.time()
        text = http.get("/metrics").text
        offsets: defaultdict[str, set[int]] = defaultdict(set)
        times: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                group = sample.labels.get("consumergroup", "")
                if sample.name == "sidecar_committed_offset":
                    offsets[group].add(int(sample.value))
                elif sample.name == "sidecar_last_successful_commit_timestamp_seconds":
                    times[group] = sample.value
        for group in self.groups:
            batch = _one(offsets.get(group, set()))
            self.metrics[group].append(Export(at, batch, times.get(group)))
        for group in self.status_groups:
            at = time.time()
            answer = http.get(f"/v1/status/{group}")
            if answer.status_code == 200:
                said = answer.json()
                batch = _one({p["current_offset"] for p in said["partitions"]})
                self.status[group].append(Export(at, batch, said["last_commit_at"]))


def _one(values: set[int]) -> int:
    return next(iter(values)) if len(values) == 1 else 0
