"""Background delivery of progress events to the sidecar, for the listener in the driver.

Standard library only. Invariants:
  - ``offer`` never blocks on the network and never raises: it stores the event and wakes
    the sender thread.
  - Memory is bounded: per query only the newest unsent event is kept (a newer checkpoint
    supersedes older ones); an older one still waiting is replaced and counted.
  - An event is retried with exponential backoff on connection errors, timeouts, 429 and
    5xx, unless a newer event of its query arrived meanwhile. Other answers (2xx, and 4xx
    that a retry cannot fix) end its delivery; a 4xx is logged with the service's reason.
  - ``flush`` waits a bounded time for everything offered so far to be delivered or given up.
  - With ``token_file`` the token is read from the file before each delivery when the
    file changed (a projected Kubernetes service-account token is rewritten by the
    kubelet, hourly by default; a mounted Secret rotates in place). A 401 is then retried
    like a 5xx: the next token in the file is the cure. An unreadable file keeps the token
    last read (and names the problem in ``stats.last_error``).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass, field

from spark_offset_listener import __version__

log = logging.getLogger("spark_offset_listener")

# Every request names the listener's release (and the Python it runs on): the service's
# access logs, and a proxy's, tell which jobs run which listener.
USER_AGENT = f"spark-offset-listener/{__version__} Python/{platform.python_version()}"

RETRIABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass
class SenderStats:
    offered: int = 0
    delivered: int = 0
    superseded: int = 0  # replaced by a newer event of the same query before being sent
    rejected: int = 0  # answered with a 4xx that a retry cannot fix
    retries: int = 0
    last_error: str | None = None


@dataclass
class _Outgoing:
    query_id: str
    body: bytes
    attempts: int = 0
    not_before: float = 0.0


@dataclass
class ProgressSender:
    url: str
    token: str | None = None
    timeout: float = 5.0
    ssl_context: ssl.SSLContext | None = None
    backoff_initial: float = 0.2
    backoff_max: float = 10.0
    token_file: str | None = None
    stats: SenderStats = field(default_factory=SenderStats)

    def __post_init__(self) -> None:
        if self.token and self.token_file:
            raise ValueError("give token or token_file, not both")
        self._file_token: str | None = None
        self._file_stamp: tuple[float, int, int] | None = None  # mtime, size, inode
        self._endpoint = self.url.rstrip("/") + "/v1/progress"
        self._waiting: OrderedDict[str, _Outgoing] = OrderedDict()
        self._sending: str | None = None
        self._changed = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="offset-sidecar-sender", daemon=True)
        self._thread.start()

    def offer(
        self, query_id: str, group_id: str, progress_json: str, cluster: str | None = None
    ) -> None:
        """Queue ``progress_json`` (Spark's own JSON text) for ``group_id``, whose offsets
        live on Kafka cluster ``cluster`` (None: the service's choice)."""
        body = b'{"group_id":%s,"progress":%s%s}' % (
            json.dumps(group_id).encode(),
            progress_json.encode(),
            b"" if cluster is None else b',"cluster":%s' % json.dumps(cluster).encode(),
        )
        with self._changed:
            self.stats.offered += 1
            if query_id in self._waiting:
                self.stats.superseded += 1
            self._waiting[query_id] = _Outgoing(query_id, body)
            self._waiting.move_to_end(query_id)
            self._changed.notify_all()

    def pending(self) -> int:
        with self._changed:
            return len(self._waiting) + (1 if self._sending else 0)

    def flush(self, timeout: float) -> bool:
        """Wait until nothing is waiting or in delivery; False if ``timeout`` ran out."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._waiting or self._sending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def close(self, timeout: float) -> None:
        delivered = self.flush(timeout)
        with self._changed:
            if not delivered:
                log.warning(
                    "stopping with %d progress events undelivered to %s (%s)",
                    len(self._waiting),
                    self.url,
                    self.stats.last_error,
                )
            self._stopped = True
            self._waiting.clear()
            self._changed.notify_all()

    def _next(self) -> _Outgoing | None:
        with self._changed:
            while not self._stopped:
                now = time.monotonic()
                ready = [o for o in self._waiting.values() if o.not_before <= now]
                if ready:
                    outgoing = ready[0]
                    del self._waiting[outgoing.query_id]
                    self._sending = outgoing.query_id
                    return outgoing
                wake_at = min((o.not_before for o in self._waiting.values()), default=None)
                self._changed.wait(None if wake_at is None else max(0.0, wake_at - now))
            return None

    def _run(self) -> None:
        while (outgoing := self._next()) is not None:
            retry = False
            try:
                retry = self._deliver(outgoing)
            except Exception as exc:  # never let the thread die
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("unexpected error delivering progress to %s", self.url)
            with self._changed:
                self._sending = None
                if retry and outgoing.query_id not in self._waiting:
                    outgoing.attempts += 1
                    delay = min(self.backoff_max, self.backoff_initial * 2**outgoing.attempts)
                    outgoing.not_before = time.monotonic() + delay
                    self._waiting[outgoing.query_id] = outgoing
                    self.stats.retries += 1
                self._changed.notify_all()

    def _deliver(self, outgoing: _Outgoing) -> bool:
        """Send once; True if it should be retried."""
        request = urllib.request.Request(self._endpoint, data=outgoing.body, method="POST")
        request.add_header("Content-Type", "application/json")
        request.add_header("User-Agent", USER_AGENT)
        token = self._token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout, context=self.ssl_context
            ) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            reason = exc.read(2048).decode("utf-8", "replace")
            self.stats.last_error = f"HTTP {exc.code}: {reason}"
            if exc.code in RETRIABLE_STATUS or (exc.code == 401 and self.token_file):
                return True
            self.stats.rejected += 1
            log.warning("the sidecar refused a progress event (HTTP %s): %s", exc.code, reason)
            return False
        except (OSError, TimeoutError) as exc:
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            if outgoing.attempts == 0:
                log.warning("cannot reach the sidecar at %s (%s); retrying", self.url, exc)
            return True
        self.stats.delivered += 1
        return False

    def _token(self) -> str | None:
        """The literal token, else the file's (read again when the file changed)."""
        if not self.token_file:
            return self.token
        try:
            stat = os.stat(self.token_file)  # follows the kubelet's ..data symlink
            stamp = (stat.st_mtime, stat.st_size, stat.st_ino)
            if stamp != self._file_stamp:
                with open(self.token_file, encoding="utf-8") as file:
                    self._file_token = file.read().strip()
                self._file_stamp = stamp
        except OSError as exc:
            self.stats.last_error = f"cannot read the token file {self.token_file}: {exc}"
        return self._file_token
