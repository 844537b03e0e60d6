"""Watch a group's committed offsets in Kafka from a thread, to catch any regression."""

from __future__ import annotations

import asyncio
import time

from aiokafka.admin import AIOKafkaAdminClient

from tests.support.in_thread import InThread


class OffsetWatch(InThread):
    """Polls ``group`` every ``interval`` s; ``regressions`` lists every partition seen to
    move backwards, ``history`` every distinct observation."""

    JOIN_SECONDS = 10.0

    def __init__(self, bootstrap: str, group: str, interval: float = 0.05) -> None:
        self.bootstrap, self.group, self.interval = bootstrap, group, interval
        self.latest: dict[tuple[str, int], int] = {}
        self.history: list[dict[tuple[str, int], int]] = []
        self.regressions: list[str] = []
        self.errors = 0
        super().__init__()

    def _loop(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=3000)
        await admin.start()
        try:
            while not self._stop.is_set():
                try:
                    found = await admin.list_consumer_group_offsets(self.group)
                except Exception:
                    self.errors += 1
                    await asyncio.sleep(self.interval)
                    continue
                now = {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}
                for tp, offset in now.items():
                    before = self.latest.get(tp)
                    if before is not None and offset < before:
                        self.regressions.append(f"{tp[0]}/{tp[1]}: {before} -> {offset}")
                if now and now != self.latest:
                    self.history.append(now)
                self.latest.update(now)
                await asyncio.sleep(self.interval)
        finally:
            await admin.close()

    def wait_for(self, expected: dict[tuple[str, int], int], timeout: float) -> float:
        """Seconds until the watched offsets equal ``expected``."""
        started = time.monotonic()
        while self.latest != expected:
            if time.monotonic() - started > timeout:
                raise AssertionError(f"offsets {self.latest} != {expected} after {timeout} s")
            time.sleep(self.interval)
        return time.monotonic() - started
