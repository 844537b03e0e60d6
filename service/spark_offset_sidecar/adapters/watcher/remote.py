"""A watcher run on its own (``SIDECAR_WATCHER=separate`` or ``paired``), told what only
this process's memory knows, as a child is (``runtime.memory_relay``): at
``SIDECAR_WATCHER_URL``, or, paired, at the URL the watcher paired with this replica
advertised (``point_at``, from each lease renewal).

Its readers ask it directly, so telling is all this link does. With the watcher's token
(``SIDECAR_WATCHER_TOKEN_FILE``) each message carries it, and the watcher takes what it
is told from any address; without it, from a loopback address only (``app.watch``):
nothing else in the request says who sends it.

Invariants
  - ``problem`` is None unless the last message failed less than ``retry_every`` seconds
    ago: the relay tries a whole message, the costly one, at most that often while the
    watcher does not take it.
  - ``generation`` changes exactly when the URL does: a watcher at another URL was told
    nothing by this process, and the relay's next message is whole. (A watcher started
    again at the same URL refuses a partial message, and the relay's next one is whole.)
  - With no URL (paired, no watcher yet) nothing is sent: ``problem`` says so (the relay
    builds no message meanwhile) and ``tell`` raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from spark_offset_sidecar.adapters.watcher.told import send_told
from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.ports.watcher import Told

RETRY_EVERY = 5.0  # seconds between whole messages to a watcher that takes none
UNPAIRED = "no watcher is paired with this replica (offset-sidecar watch with "
UNPAIRED += "SIDECAR_WATCHER_ADVERTISED_URL pairs one)"


class WatcherAt:
    def __init__(
        self,
        url: str | None,
        *,
        token: bytes | None = None,
        timeout: float = 30.0,
        retry_every: float = RETRY_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        headers = {"authorization": f"Bearer {token.decode()}"} if token is not None else None
        self._client = httpx.AsyncClient(timeout=timeout, trust_env=False, headers=headers)
        self._url = url
        self._generation = 0
        self._retry_every = retry_every
        self._clock = clock
        self._failed: tuple[float, str] | None = None  # (when, why) of the last failure

    @property
    def url(self) -> str | None:
        return self._url

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def problem(self) -> str | None:
        if self._url is None:
            return UNPAIRED
        if self._failed is None or self._clock() - self._failed[0] >= self._retry_every:
            return None
        return self._failed[1]

    def point_at(self, url: str | None) -> None:
        """The watcher is at ``url`` now (None: no watcher)."""
        if url != self._url:
            self._url, self._generation, self._failed = url, self._generation + 1, None

    async def tell(self, told: Told) -> None:
        try:
            if self._url is None:
                raise WatcherUnavailable(UNPAIRED)
            await send_told(self._client, told, self._url)
        except WatcherUnavailable as exc:
            self._failed = (self._clock(), str(exc))
            raise
        self._failed = None

    async def close(self) -> None:
        await self._client.aclose()
