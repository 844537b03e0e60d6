"""The watcher as the process taking events reaches it when it started it
(``SIDECAR_WATCHER=child``): the readers' requests it answers, and its share of
``/metrics``.

``WatcherLink`` is the port; ``adapters.watcher.child.WatcherChild`` is the real one (a
child process on a Unix socket of its own).

Contract
  - ``get`` answers a GET of ``path`` (and ``query``) with ``headers`` passed on (the
    caller's token among them: the watcher checks it as the service would), as the
    watcher answered it; raises ``WatcherUnavailable`` when the watcher does not answer
    (starting, or started again after it died).
  - ``share`` returns the watcher's share of ``/metrics`` (``WATCHED_METRICS``) as it
    sent it, gzip-compressed; raises ``WatcherUnavailable`` as ``get`` does.
  - ``problem`` says why the watcher does not answer now, or None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

WATCHED_METRICS = "/metrics/watched"  # the watcher's share of /metrics, without its own series


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


class WatcherLink(Protocol):
    async def get(self, path: str, query: str, headers: Mapping[str, str]) -> Answer: ...

    async def share(self) -> bytes: ...

    @property
    def problem(self) -> str | None: ...
