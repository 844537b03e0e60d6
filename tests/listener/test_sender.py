"""The listener's background sender against a real HTTP server on loopback."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

from spark_offset_listener.listener import OffsetCommitListener
from spark_offset_listener.sender import ProgressSender
from tests.support.fake_sidecar import FakeSidecar, progress


def test_delivers_spark_json_verbatim_with_the_group_and_token(sidecar: FakeSidecar) -> None:
    sender = ProgressSender(sidecar.url, token="s3cret")
    sender.offer("q", "group-a", progress("q", 1))
    assert sender.flush(60)
    assert sidecar.received == [{"group_id": "group-a", "progress": json.loads(progress("q", 1))}]
    assert sidecar.headers_seen[0]["Authorization"] == "Bearer s3cret"
    assert sender.stats.delivered == 1


def test_every_request_names_the_listeners_release(sidecar: FakeSidecar) -> None:
    """The User-Agent carries releases.toml's version (tests/unit/test_versions.py holds
    the package's to it), not urllib's own."""
    from spark_offset_listener import __version__

    sender = ProgressSender(sidecar.url)
    sender.offer("q", "g", progress("q", 1))
    assert sender.flush(60)
    agent = sidecar.headers_seen[0]["User-Agent"]
    assert agent.startswith(f"spark-offset-listener/{__version__} Python/"), agent


def test_a_listener_that_names_its_cluster_sends_it_with_every_event(
    sidecar: FakeSidecar,
) -> None:
    listener = OffsetCommitListener(sidecar.url, group_id="orders", cluster="eu-west")
    listener.report_json(progress("q", 1))
    plain = OffsetCommitListener(sidecar.url, group_id="payments")
    plain.report_json(progress("p", 1))
    assert listener.sender.flush(60)
    assert plain.sender.flush(60)
    by_group = {body["group_id"]: body for body in sidecar.received}
    assert by_group["orders"]["cluster"] == "eu-west"
    assert by_group["orders"]["progress"] == json.loads(progress("q", 1))
    assert "cluster" not in by_group["payments"], "no cluster named: the service chooses"


def test_only_the_newest_unsent_event_per_query_is_kept(sidecar: FakeSidecar) -> None:
    sidecar.answering.clear()
    sender = ProgressSender(sidecar.url, timeout=300)  # the test alone ends the hold
    sender.offer("q", "g", progress("q", 0))
    assert sidecar.arrived.wait(60), "batch 0 is being delivered"
    for batch in range(1, 50):
        sender.offer("q", "g", progress("q", batch))
        sender.offer("other", "g2", progress("other", batch))
    assert sender.pending() == 3, "bounded: one waiting per query plus one in delivery"
    sidecar.answering.set()
    assert sender.flush(60)
    batches = [(r["progress"]["id"], r["progress"]["batchId"]) for r in sidecar.received]
    assert sorted(batches) == [("other", 49), ("q", 0), ("q", 49)]
    assert sender.stats.superseded == 2 * 48


def test_retries_503_and_gives_up_on_422(sidecar: FakeSidecar) -> None:
    sidecar.statuses = [503, 503, 422]
    sender = ProgressSender(sidecar.url, backoff_initial=0.01)
    sender.offer("q", "g", progress("q", 1))
    assert sender.flush(60)
    assert sender.stats.retries == 2
    assert sender.stats.rejected == 1
    assert sidecar.received == []
    assert "HTTP 422" in (sender.stats.last_error or "")


def test_offer_never_waits_for_a_hung_service_and_flush_is_bounded() -> None:
    """The service accepts connections and never answers: the sender's thread hangs in
    its request (read timeout 300 s). 1000 offers all return while that request is still
    hanging, so none of them waited for it."""
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # connections complete in the backlog; nothing is ever read
    try:
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        sender = ProgressSender(url, timeout=300, backoff_initial=0.05)
        sender.offer("q", "g", progress("q", 0))
        hung.settimeout(60)
        connection, _ = hung.accept()  # the sender thread is now inside its request
        offered = threading.Event()

        def offer_all() -> None:
            for batch in range(1, 1001):
                sender.offer("q", "g", progress("q", batch))
            offered.set()

        threading.Thread(target=offer_all, daemon=True).start()
        assert offered.wait(60), "offer waited on the network"
        assert sender.stats.last_error is None, "the request was still hanging all along"
        assert sender.pending() == 2, "one in delivery, the newest waiting"
        assert sender.stats.superseded == 999
        assert sender.flush(0.5) is False, "flush gives up at its bound"
        sender.close(0.1)
        assert sender.stats.delivered == 0
        connection.close()
    finally:
        hung.close()


def test_a_token_file_is_read_again_when_it_changes(sidecar: FakeSidecar, tmp_path: Path) -> None:
    """As the kubelet rotates a projected service-account token: a new file swapped in
    under the same name (a symlink flip there, a rename here)."""
    path = tmp_path / "token"
    path.write_text("first-token-000000\n")
    sender = ProgressSender(sidecar.url, token_file=str(path))
    sender.offer("q", "g", progress("q", 1))
    assert sender.flush(60)
    fresh = tmp_path / "token.new"
    fresh.write_text("second-token-11111\n")
    fresh.rename(path)
    sender.offer("q", "g", progress("q", 2))
    assert sender.flush(60)
    seen = [h["Authorization"] for h in sidecar.headers_seen]
    assert seen == ["Bearer first-token-000000", "Bearer second-token-11111"]


def test_with_a_token_file_a_401_is_retried_with_the_next_token(
    sidecar: FakeSidecar, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text("expired-token-00000")
    sidecar.statuses = [401]
    sender = ProgressSender(sidecar.url, token_file=str(path), backoff_initial=0.2)
    sender.offer("q", "g", progress("q", 1))
    fresh = tmp_path / "token.new"
    fresh.write_text("renewed-token-00000")
    fresh.rename(path)
    assert sender.flush(60)
    assert sender.stats.rejected == 0
    assert sender.stats.delivered == 1
    assert sidecar.headers_seen[-1]["Authorization"] == "Bearer renewed-token-00000"


def test_a_literal_token_401_is_not_retried(sidecar: FakeSidecar) -> None:
    sidecar.statuses = [401]
    sender = ProgressSender(sidecar.url, token="wrong-token-000000", backoff_initial=0.01)
    sender.offer("q", "g", progress("q", 1))
    assert sender.flush(60)
    assert sender.stats.rejected == 1
