"""``ports.watcher.MemoryUpdate`` between a service and its watcher child: the dataclasses
themselves, pickled, as the writer's batches are (docs/decisions.md, "One channel to
each child"). Sent by ``WatcherChild.tell`` (``adapters.watcher.child``), read by the
watcher's ``MEMORY_UPDATES`` route, which only its service reaches (its channel: no port
serves the watcher). No HTTP client here: the watcher, which only reads them, imports
none.

A message names the release that sent it: a watcher started again after the package was
upgraded on disk refuses its older service's messages rather than misread them.
"""

from __future__ import annotations

import pickle

from spark_offset_sidecar import __version__
from spark_offset_sidecar.ports.watcher import MemoryUpdate


class MemoryUpdateRefused(ValueError):
    """A message that is not a ``MemoryUpdate`` of this release."""


def encode_memory_update(update: MemoryUpdate) -> bytes:
    return pickle.dumps((__version__, update), protocol=pickle.HIGHEST_PROTOCOL)


def decode_memory_update(body: bytes) -> MemoryUpdate:
    try:
        release, update = pickle.loads(body)
    except Exception as exc:  # any bytes: pickle raises many kinds
        raise MemoryUpdateRefused(f"not a memory update: {exc!r:.200}") from None
    if release != __version__:
        raise MemoryUpdateRefused(
            f"a memory update of release {release!r:.40}; this watcher is {__version__}"
        )
    if not isinstance(update, MemoryUpdate):
        raise MemoryUpdateRefused(f"not a memory update: a {type(update).__name__}")
    return update
