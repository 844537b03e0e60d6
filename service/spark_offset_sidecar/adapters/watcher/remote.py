"""A watcher run on its own beside this process (``SIDECAR_WATCHER=separate``, another
container of the pod or another process of the machine), told at ``SIDECAR_WATCHER_URL``
what only this process's memory knows, as a child is (``runtime.memory_relay``).

Its readers ask it directly, so telling is all this link does. The watcher takes what
it is told from a loopback address only (``app.watch``): nothing in the request says who
sends it, and the loopback address is what only the pod's (or machine's) own processes
reach it from.

Invariants
  - ``problem`` is None unless the last message failed less than ``retry_every`` seconds
    ago: the relay tries a whole message, the costly one, at most that often while the
    watcher does not take it.
  - ``generation`` never changes: a watcher started again refuses a partial message, and
    the relay's next one is whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from spark_offset_sidecar.adapters.watcher.told import send_told
from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.ports.watcher import Told

RETRY_EVERY = 5.0  # seconds between whole messages to a watcher that takes none


class WatcherAt:
    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        retry_every: float = RETRY_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = httpx.AsyncClient(base_url=url, timeout=timeout, trust_env=False)
        self._retry_every = retry_every
        self._clock = clock
        self._failed: tuple[float, str] | None = None  # (when, why) of the last failure

    @property
    def generation(self) -> int:
        return 0

    @property
    def problem(self) -> str | None:
        if self._failed is None or self._clock() - self._failed[0] >= self._retry_every:
            return None
        return self._failed[1]

    async def tell(self, told: Told) -> None:
        try:
            await send_told(self._client, told)
        except WatcherUnavailable as exc:
            self._failed = (self._clock(), str(exc))
            raise
        self._failed = None

    async def close(self) -> None:
        await self._client.aclose()
