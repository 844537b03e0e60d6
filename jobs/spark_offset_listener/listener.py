"""The StreamingQueryListener that reports every completed batch to the sidecar.

    from spark_offset_listener.listener import OffsetCommitListener
    spark.streams.addListener(OffsetCommitListener("http://sidecar:8000", group_id="orders"))

It never slows or breaks Spark:
  - the callback only reads the progress as JSON text and hands it to a background sender
    (``spark_offset_listener.sender``), which keeps per query only the newest unsent event;
  - the progress is read from the Java object's own ``json()`` -- two py4j calls -- instead of
    PySpark's conversion into Python objects (about 450 py4j round trips, ~150 ms per event,
    before user code runs); the public API is the fallback if that bridge is unavailable;
  - no exception escapes a callback; on query termination and at interpreter exit the
    sender is flushed for at most ``flush_timeout`` seconds.

Depends on the standard library (and pyspark, which the driver has), so it ships with
``--py-files`` or as a wheel without the service's dependencies.
"""

from __future__ import annotations

import atexit
import json
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any, ClassVar

from pyspark.sql.streaming.listener import StreamingQueryListener

from spark_offset_listener.sender import ProgressSender

log = logging.getLogger("spark_offset_listener")

GroupChoice = str | Callable[[str, str | None], str]


class OffsetCommitListener(StreamingQueryListener):
    """Reports each query progress to the sidecar at ``service_url``.

    The consumer group of a query is ``group_id`` (one fixed name), or ``group_prefix`` +
    the query's name, or ``group_id(query_id, query_name)`` when ``group_id`` is callable.
    The service's token is ``token``, or the content of ``token_file``, read again whenever
    the file changes (a projected service-account token, a mounted Secret). ``cluster``
    names the Kafka cluster the query reads, when the service has several (default: the
    service's choice for the group).
    Queries without a Kafka source are reported too; the service ignores them.
    """

    def __init__(
        self,
        service_url: str,
        group_id: GroupChoice | None = None,
        *,
        group_prefix: str | None = None,
        token: str | None = None,
        token_file: str | None = None,
        timeout: float = 5.0,
        flush_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        cluster: str | None = None,
    ) -> None:
        if (group_id is None) == (group_prefix is None):
            raise ValueError("give exactly one of group_id and group_prefix")
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        self._group = group_id
        self._group_prefix = group_prefix
        self.cluster = cluster
        self.service_url = service_url
        self.flush_timeout = flush_timeout
        self._sender_options: dict[str, Any] = {
            "token": token,
            "token_file": token_file,
            "timeout": timeout,
            "ssl_context": ssl_context,
        }
        self.callback_seconds = 0.0  # time spent inside Spark's callback thread
        self.events = 0
        self._jlistener_obj: Any = None
        self._sender: ProgressSender | None = None  # started where the listener runs

    @property
    def sender(self) -> ProgressSender:
        """The background sender, started on first use in the process that runs the
        listener (with Spark Connect on 3.5 that is a Python worker of the server, which
        unpickles the listener there): a pickled listener holds no thread, lock or socket."""
        if self._sender is None:
            self._sender = ProgressSender(self.service_url, **self._sender_options)
            atexit.register(self._sender.close, self.flush_timeout)
        return self._sender

    def __getstate__(self) -> dict[str, Any]:
        if self._sender_options["ssl_context"] is not None:
            raise TypeError(
                "an OffsetCommitListener with ssl_context cannot be pickled (an SSLContext "
                "cannot): give the service's CA through the environment where it runs"
            )
        state = dict(self.__dict__)
        state["_sender"] = None  # its thread and queue stay where they run
        state["_jlistener_obj"] = None  # a py4j handle of this driver's JVM
        return state

    # --- the fast bridge ------------------------------------------------------------

    @property
    def _jlistener(self) -> Any:
        """What ``spark.streams.addListener`` registers with the JVM: our own py4j bridge
        that reads ``jevent.progress().json()`` instead of converting the whole event."""
        if self._jlistener_obj is None:
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            if jvm is None:
                raise RuntimeError("add the listener after the SparkSession is created")
            self._jlistener_obj = jvm.PythonStreamingQueryListenerWrapper(_JsonBridge(self))
        return self._jlistener_obj

    def report_json(self, progress_json: str) -> None:
        """Hand one progress (Spark's JSON text) to the sender. Never raises."""
        try:
            head = json.loads(progress_json)
            query_id, name = str(head["id"]), head.get("name")
            self.sender.offer(query_id, self.group_for(query_id, name), progress_json, self.cluster)
        except Exception:
            log.exception("dropped a progress event that could not be reported")

    def _count(self, started: float) -> None:
        self.events += 1
        self.callback_seconds += time.perf_counter() - started

    def group_for(self, query_id: str, query_name: str | None) -> str:
        if self._group_prefix is not None:
            return self._group_prefix + (query_name or query_id)
        if callable(self._group):
            return self._group(query_id, query_name)
        assert self._group is not None
        return self._group

    # --- the public API (fallback when the bridge is not used) -----------------------

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        started = time.perf_counter()
        try:
            self.report_json(event.progress.json)
        except Exception:
            log.exception("dropped a progress event that could not be read")
        finally:
            self._count(started)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self._flush()

    def _flush(self) -> None:
        try:
            if not self.sender.flush(self.flush_timeout):
                log.warning(
                    "query terminated with %d progress events not yet delivered (%s)",
                    self.sender.pending(),
                    self.sender.stats.last_error,
                )
        except Exception:
            log.exception("flushing progress events failed")


class _JsonBridge:
    """Implements Spark's Java listener interface for py4j; every method is guarded."""

    def __init__(self, listener: OffsetCommitListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        started = time.perf_counter()
        try:
            text = jevent.progress().json()
        except Exception:
            log.warning("reading the progress JSON failed; using PySpark's conversion")
            try:
                from pyspark.sql.streaming.listener import QueryProgressEvent

                self.listener.onQueryProgress(QueryProgressEvent.fromJObject(jevent))
            except Exception:
                log.exception("dropped a progress event that could not be read")
            return
        try:
            self.listener.report_json(text)
        finally:
            self.listener._count(started)

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        self.listener._flush()

    class Java:
        implements: ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
        ]
