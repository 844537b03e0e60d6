"""``CheckpointStorage`` on fsspec: local paths, ``file://``, ``s3://``, ``abfs://``,
``gs://`` and any other fsspec protocol whose package is installed (credentials from each
client's usual places: docs/attach/checkpoint-folder.md; options are never logged).

Foreign errors are mapped here and nowhere else: a missing file is None (or an empty
listing) unless its bucket is missing too (the folder can never appear: ``unreachable``);
access errors are ``denied``; anything else the client raises is ``unreachable``. A
hostile folder costs its own poll only: a read takes at most ``MAX_FILE_BYTES``, and a
local file that is not a regular file (a pipe would wait for a writer forever) is
refused without waiting. Listings are never cached (s3fs caches them by default).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import fsspec
from fsspec.core import split_protocol
from fsspec.implementations.local import LocalFileSystem

from spark_offset_sidecar.core.spark.checkpoint_log import batch_id_of
from spark_offset_sidecar.errors import (
    CheckpointReadError,
    ConfigError,
    UnreadableCheckpoint,
    install_extra,
)

T = TypeVar("T")
# Spark's offset log of a query reading 100,000 partitions is about 3 MB.
MAX_FILE_BYTES = 16 * 2**20
# Protocol-specific defaults: a poll sees new files (no listing cache), and an outage
# fails a poll in seconds rather than after botocore's retries (~12 s a call by default).
_FRESH: dict[str, dict[str, Any]] = {
    "s3": {
        "use_listings_cache": False,
        "max_concurrency": 1,  # one GET a read: larger values first ask the size (a HEAD)
        "config_kwargs": {
            "connect_timeout": 3,
            "read_timeout": 10,
            "retries": {"max_attempts": 2, "mode": "standard"},
        },
    },
    # adlfs and gcsfs: no listings cache either
    "abfs": {"use_listings_cache": False},
    "gcs": {"use_listings_cache": False},
}
_DENIED_CODES = (
    "AccessDenied",  # S3
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "Forbidden",
    "AuthorizationFailure",  # Azure
    "AuthenticationFailed",
    "AuthorizationPermissionMismatch",
)
_DENIED_STATUS = (401, 403)  # Google's (gcsfs HttpError.code) and Azure's (status_code)
# One name per filesystem: Spark's s3a:// is s3; Hadoop's abfss:// (TLS) and Azure's az://
# are adlfs's abfs; gs:// is gcsfs's gcs.
_SAME = {None: "file", "local": "file", "s3a": "s3", "abfss": "abfs", "az": "abfs", "gs": "gcs"}
_EXTRAS = {"s3": "s3", "abfs": "azure", "gcs": "gcs"}


def protocol_of(path: str) -> str:
    """The fsspec protocol, one name per filesystem (Spark's ``s3a://`` is ``s3``)."""
    protocol, _ = split_protocol(path)
    return str(_SAME.get(protocol, protocol))


def check_path(path: str) -> str | None:
    """Why ``path`` cannot be followed here (unknown protocol, its package missing), or
    None. The message names what to install."""
    protocol = protocol_of(path)
    if protocol == "gcs":
        # Read by gcsfs when it is first imported: gcsfs 2026.x, unless told otherwise,
        # looks up each bucket's layout over gRPC (its experimental HNS support), 60 s a
        # read where that API does not answer (an emulator, a narrow role). Plain object
        # reads are all a follower needs; an operator's own setting wins.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError:
        extra = _EXTRAS.get(protocol)
        how = f": {install_extra(extra)}" if extra else ""
        return f"{protocol}:// needs a package that is not installed{how}"
    except ValueError:
        return f"{protocol}:// is not a filesystem this service knows"
    return None


class FsspecCheckpointStorage:
    def __init__(self, options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        self.requests = 0
        self._filesystems: dict[str, fsspec.AbstractFileSystem] = {}
        self._buckets: set[str] = set()  # (protocol, bucket) seen to exist, as "p://b"
        self._lock = threading.Lock()

    def read_text(self, path: str) -> str | None:
        fs, inner = self._resolve(path)
        try:
            if isinstance(fs, LocalFileSystem):
                data = self._call(path, lambda: _read_regular_file(inner, MAX_FILE_BYTES + 1))
            else:  # one ranged GET on object stores
                data = self._call(path, lambda: fs.cat_file(inner, start=0, end=MAX_FILE_BYTES + 1))
        except FileNotFoundError:
            self._bucket_exists(fs, inner, path)
            return None
        if len(data) > MAX_FILE_BYTES:
            raise UnreadableCheckpoint(
                path, 1, f"is over {MAX_FILE_BYTES // 2**20} MiB: not a file Spark writes"
            )
        return bytes(data).decode("utf-8", errors="replace")

    def exists(self, path: str) -> bool:
        fs, inner = self._resolve(path)
        if isinstance(fs, LocalFileSystem):  # a stat: reading a pipe's first byte would wait
            return self._call(path, lambda: os.path.exists(inner))
        # One ranged read of the first byte: on S3 one request, where s3fs's ``exists``
        # follows a missing key's HEAD with a listing (is it a "directory"?).
        try:
            self._call(path, lambda: fs.cat_file(inner, start=0, end=1))
        except FileNotFoundError:
            return False
        return True

    def batch_ids(self, directory: str) -> list[int]:
        fs, inner = self._resolve(directory)
        try:
            names = self._call(directory, lambda: fs.ls(inner, detail=False))
        except FileNotFoundError:
            self._bucket_exists(fs, inner, directory)
            return []
        found = (batch_id_of(str(name).rstrip("/").rsplit("/", 1)[-1]) for name in names)
        return [batch for batch in found if batch is not None]

    def _resolve(self, path: str) -> tuple[fsspec.AbstractFileSystem, str]:
        protocol = protocol_of(path)
        with self._lock:
            fs = self._filesystems.get(protocol)
            if fs is None:
                if problem := check_path(path):
                    raise CheckpointReadError(path, "unreachable", problem)
                options = {**_FRESH.get(protocol, {}), **self.options.get(protocol, {})}
                try:
                    fs = fsspec.filesystem(protocol, **options)
                except TypeError as exc:
                    raise ConfigError(
                        "SIDECAR_CHECKPOINT_STORAGE_OPTIONS", f"{protocol}: {exc}"
                    ) from None
                self._filesystems[protocol] = fs
        return fs, fs._strip_protocol(path)

    def _bucket_exists(self, fs: fsspec.AbstractFileSystem, inner: str, path: str) -> None:
        """After a missing file on an object store: is its bucket (container) there? A
        missing one is an error of the folder's, not "no checkpoint yet": Spark's files
        can never appear there. Asked once per bucket that exists."""
        if isinstance(fs, LocalFileSystem):
            return
        bucket = inner.split("/", 1)[0]
        key = f"{protocol_of(path)}://{bucket}"
        if key in self._buckets:
            return
        if not self._call(path, lambda: fs.exists(bucket)):
            raise CheckpointReadError(
                path, "unreachable", f"no bucket or container {bucket!r} ({key}) exists"
            )
        self._buckets.add(key)

    def _call(self, path: str, call: Callable[[], T]) -> T:
        self.requests += 1
        try:
            return call()
        except (FileNotFoundError, UnreadableCheckpoint):
            raise
        except PermissionError as exc:
            raise CheckpointReadError(path, "denied", f"access denied: {exc}") from None
        except Exception as exc:  # the client's own errors: botocore's, aiohttp's, OSError
            text = f"{type(exc).__name__}: {exc}"
            status = getattr(exc, "code", None) or getattr(exc, "status_code", None)
            denied = status in _DENIED_STATUS or any(code in text for code in _DENIED_CODES)
            reason = "denied" if denied else "unreachable"
            raise CheckpointReadError(path, reason, text) from None


def _read_regular_file(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the local file ``path``; refuses anything but a regular
    file without waiting (opened non-blocking: a pipe with no writer opens at once)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a pipe, socket or device"
            raise UnreadableCheckpoint(path, 1, f"is {kind}, not a file Spark writes")
        chunks, size = [], 0
        while size < limit and (chunk := os.read(fd, min(limit - size, 2**20))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
