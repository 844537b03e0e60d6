"""``ports.watcher.MemoryUpdate`` between a service and its watcher child: the dataclasses
themselves, pickled (docs/decisions.md, "One channel to each child"). A message names the
release that sent it: a watcher started again after the package was upgraded on disk
refuses its older service's messages rather than misread them.
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
