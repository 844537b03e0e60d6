"""Reads answered from the status board (``ports.status_board``, its double here; the
real one on PostgreSQL is in tests/adapters/test_status_board.py and the replicas'
end-to-end test): two apps sharing a board answer every read alike, a group that moves
to the other app keeps its status window, and a board that cannot be reached answers 503
and loses no report."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.testing import InMemoryLogEnds, InMemoryStatusBoard, MemoryKafka
from tests.support.app import doubles, post_progress, settings_for
from tests.support.service import settled_reads, wait_for

GROUP = "orders-app"
FAST = {"lag_read_interval_seconds": 0.05}
CLOCK_WORDS = re.compile(r"\d+ (s|min|h|d) ago|as of\s+[\d: -]+UTC")


def app_on(tmp_path: Path, board: InMemoryStatusBoard, ends: InMemoryLogEnds) -> TestClient:
    tmp_path.mkdir()
    settings = settings_for(tmp_path, **FAST)
    return TestClient(
        create_app(settings, doubles(settings, MemoryKafka(log_ends=ends), board=board))
    )


def reads(client: TestClient) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for path in ("/v1/status", f"/v1/status/{GROUP}", "/ui"):
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.text)
        answers[path] = CLOCK_WORDS.sub("", answer.text) if path == "/ui" else answer.json()
    return answers


def samples(client: TestClient) -> int:
    answer = client.get(f"/v1/status/{GROUP}")
    if not answer.is_success:
        return 0
    return min((p["samples"] for p in answer.json()["partitions"]), default=0)


def test_apps_sharing_a_board_answer_alike_and_a_moved_group_keeps_its_window(
    tmp_path: Path,
) -> None:
    ends = InMemoryLogEnds({TopicPartition("orders", 0): 100, TopicPartition("orders", 1): 7})
    board = InMemoryStatusBoard("a")
    board.owners[GROUP] = "a"
    board_b = board.share("b")
    with app_on(tmp_path / "a", board, ends) as a, app_on(tmp_path / "b", board_b, ends) as b:
        for batch in range(4):
            post_progress(a, batch, {"orders": {"0": 10 * batch, "1": 7}})
            wait_for(lambda n=batch + 1: samples(a) >= n, what=f"batch {batch} sampled")
        answers = settled_reads({"a": lambda: reads(a), "b": lambda: reads(b)})
        seen_by_a = answers["a"]
        assert answers["b"] == seen_by_a  # b never saw the group: it reads what a published
        status = seen_by_a[f"/v1/status/{GROUP}"]
        assert (status["reported_by"], status["totallag"], status["partition_count"]) == (
            "a",
            70,
            2,
        )
        assert GROUP in seen_by_a["/ui"]
        assert board_b.published == 0

        # The group moves to b (its events now go there): b starts from a's window.
        board.owners[GROUP] = "b"
        post_progress(b, 4, {"orders": {"0": 40, "1": 7}})
        # b reports the group before its first commit (no partitions yet) and after it
        # before its next evaluation samples that commit (a's 4 samples): the report
        # awaited holds a's window and b's own sample; started empty it would stay at 1.
        moved = wait_for(
            lambda: (
                (s := b.get(f"/v1/status/{GROUP}").json())["reported_by"] == "b"
                and min((p["samples"] for p in s["partitions"]), default=0) >= 5
                and s
            ),
            what="b's report of the group with a's window and its own sample",
        )
        assert min(p["samples"] for p in moved["partitions"]) == 5, moved  # 4 of a's + b's
        assert board_b.published >= 1  # and a, which still holds the group, no more:
        assert b.get(f"/v1/status/{GROUP}").json()["reported_by"] == "b"
        answers = settled_reads({"b": lambda: reads(b), "a": lambda: reads(a)})
        assert answers["a"] == answers["b"]


def test_a_board_that_cannot_be_reached_answers_503_and_publishes_when_back(
    tmp_path: Path,
) -> None:
    ends = InMemoryLogEnds({TopicPartition("orders", 0): 100})
    board = InMemoryStatusBoard("a")
    with app_on(tmp_path / "a", board, ends) as a:
        board.fail(StoreUnavailable("the database is away"))
        post_progress(a, 0, {"orders": {"0": 10}})
        answer = a.get("/v1/status")
        assert answer.status_code == 503, answer.text
        assert "the database is away" in answer.text
        assert a.get(f"/v1/status/{GROUP}").status_code == 503
        assert board.published == 0
        board.fail(None)
        report = wait_for(  # the watcher follows the store: its commit may come a read later
            lambda: [r for r in board.read([GROUP]) if r.status.last_commit_at is not None],
            what="the report of its commit once the board is back",
        )
        assert report[0].status.partitions[0].current_lag == 90
        assert a.get(f"/v1/status/{GROUP}").json()["totallag"] == 90
