"""The listener pickles cleanly, as Spark Connect on a 3.5 client ships it to the server
(cloudpickle, then unpickled in a Python worker there): no thread, lock, socket or py4j
handle in its state, even after it has sent; its sender starts where it lands."""

from __future__ import annotations

import pickle
import ssl
import threading

import pytest
from pyspark.serializers import CloudPickleSerializer

from spark_offset_listener.listener import OffsetCommitListener
from tests.support.fake_sidecar import FakeSidecar, progress


def test_a_used_listener_pickles_without_its_sender_and_the_copy_sends_where_it_lands(
    sidecar: FakeSidecar,
) -> None:
    listener = OffsetCommitListener(
        sidecar.url, group_id=lambda query_id, name: f"g-{name or query_id}", token="t" * 20
    )
    listener.report_json(progress("q1", 0))
    assert listener.sender.flush(5)  # sent from here: a thread and a lock exist now
    # Threads by identity: another test's sender may end meanwhile (a count then falls).
    threads = set(threading.enumerate())
    blob = CloudPickleSerializer().dumps(listener)
    copy = CloudPickleSerializer().loads(blob)
    assert not set(threading.enumerate()) - threads, "unpickling starts nothing"
    assert copy._sender is None
    copy.report_json(progress("q2", 7))
    assert copy.sender.flush(5)
    assert [body["group_id"] for body in sidecar.received] == ["g-q1", "g-q2"]
    assert sidecar.received[1]["progress"]["batchId"] == 7
    assert sidecar.headers_seen[1]["Authorization"] == "Bearer " + "t" * 20


def test_plain_pickle_works_too_and_an_ssl_context_is_refused_by_name() -> None:
    listener = OffsetCommitListener("http://sidecar:8000", group_id="orders")
    copy = pickle.loads(pickle.dumps(listener))
    assert copy.group_for("q", None) == "orders"
    secured = OffsetCommitListener(
        "https://sidecar:8443", group_id="orders", ssl_context=ssl.create_default_context()
    )
    with pytest.raises(TypeError, match="ssl_context cannot be pickled"):
        pickle.dumps(secured)
