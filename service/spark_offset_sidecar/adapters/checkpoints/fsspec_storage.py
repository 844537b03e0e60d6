"""``CheckpointStorage`` on fsspec: ``/local/path``, ``file://``, ``s3://`` (S3 and
S3-compatible stores: MinIO, Ceph, ...), and any other fsspec protocol whose package is
installed.

Foreign errors are mapped here and nowhere else: a missing file is None (or an empty
listing); ``PermissionError`` and S3's access errors are ``denied``; anything else the
filesystem or its client raises (connection refused, timeouts, 5xx) is ``unreachable``.

Listings are never cached (s3fs caches them by default): a poll must see new batches.
One filesystem object per protocol, made on first use with that protocol's options
(``SIDECAR_CHECKPOINT_STORAGE_OPTIONS``, e.g. ``{"s3": {"endpoint_url": "..."}}``);
credentials come from the usual places of each client (for S3: ``AWS_*`` variables, the
instance's role, ...).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import fsspec
from fsspec.core import split_protocol

from spark_offset_sidecar.core.checkpoint_log import batch_id_of
from spark_offset_sidecar.errors import CheckpointReadError, ConfigError

T = TypeVar("T")
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
    }
}
_DENIED_CODES = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden")


def protocol_of(path: str) -> str:
    """The fsspec protocol, one name per filesystem (Spark's ``s3a://`` is ``s3``)."""
    protocol, _ = split_protocol(path)
    return str({None: "file", "local": "file", "s3a": "s3"}.get(protocol, protocol))


def check_path(path: str) -> str | None:
    """Why ``path`` cannot be followed here (unknown protocol, its package missing), or
    None. The message names what to install."""
    protocol = protocol_of(path)
    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError:
        extra = " (pip install 'spark-offset-sidecar[s3]')" if protocol == "s3" else ""
        return f"{protocol}:// needs a package that is not installed{extra}"
    except ValueError:
        return f"{protocol}:// is not a filesystem this service knows"
    return None


class FsspecCheckpointStorage:
    def __init__(self, options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        self.requests = 0
        self._filesystems: dict[str, fsspec.AbstractFileSystem] = {}
        self._lock = threading.Lock()

    def read_text(self, path: str) -> str | None:
        fs, inner = self._resolve(path)
        try:
            data = self._call(path, lambda: fs.cat_file(inner))
        except FileNotFoundError:
            return None
        return bytes(data).decode("utf-8", errors="replace")

    def exists(self, path: str) -> bool:
        # One ranged read of the first byte: on S3 one request, where s3fs's ``exists``
        # follows a missing key's HEAD with a listing (is it a "directory"?).
        fs, inner = self._resolve(path)
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

    def _call(self, path: str, call: Callable[[], T]) -> T:
        self.requests += 1
        try:
            return call()
        except FileNotFoundError:
            raise
        except PermissionError as exc:
            raise CheckpointReadError(path, "denied", f"access denied: {exc}") from None
        except Exception as exc:  # the client's own errors: botocore's, aiohttp's, OSError
            text = f"{type(exc).__name__}: {exc}"
            reason = "denied" if any(code in text for code in _DENIED_CODES) else "unreachable"
            raise CheckpointReadError(path, reason, text) from None
