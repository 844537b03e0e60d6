"""``GET /ui`` in-process: what the page shows, in what order, what it refuses to run, and
the same tokens and read grants as the JSON routes (Basic for browsers). The page in a
real browser is ``tests/e2e/test_status_page.py``."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.app.parts import Parts
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.lag.report import NOT_REPORTED, GroupReport, summary_of
from spark_offset_sidecar.core.lag.status import GroupStatus, Status
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import UnknownTopicPartition
from spark_offset_sidecar.http.status_page import in_rank_order
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryLogEnds, MemoryKafka
from tests.support.app import doubles, settings_for
from tests.support.service import spark_progress, wait_for
from tests.support.watcher import watchers_of

TOKENS = {
    "tokens": [
        {"name": "team-a", "token": "team-a-secret-0001", "write": ["a-*"], "read": ["a-*"]},
        {"name": "ops", "token": "ops-secret-000001", "read": ["*"]},
        {"name": "writer", "token": "writer-secret-001", "write": ["*"]},
    ]
}


WRITER = {"Authorization": "Bearer writer-secret-001"}


def basic(token: str, user: str = "anyone") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()}


@pytest.fixture
def committer() -> InMemoryCommitter:
    return InMemoryCommitter()


@pytest.fixture
def client(tmp_path: Path, committer: InMemoryCommitter) -> Iterator[TestClient]:
    (tmp_path / "tokens.json").write_text(json.dumps(TOKENS))
    ends = InMemoryLogEnds(
        {TopicPartition("orders", 0): 100, TopicPartition("orders", 1): 80}
        | {TopicPartition("clicks", 0): 10}
    )
    settings = settings_for(
        tmp_path,
        tokens_file=str(tmp_path / "tokens.json"),
        lag_read_interval_seconds=0.05,
        status_err_after_failures=1,
    )
    parts = doubles(settings, MemoryKafka(committer=committer, log_ends=ends))
    with TestClient(create_app(settings, parts)) as test_client:
        served[test_client] = parts
        yield test_client
    del served[test_client]


served: dict[TestClient, Parts] = {}  # each client's parts: its watcher's reports


def watcher_reports(client: TestClient) -> Any:
    """The reports its watcher (which answers /v1/status and /ui) reads."""
    return watchers_of(served[client]).watching().reports


def test_the_page_shows_every_group_worst_first_and_runs_nothing(
    client: TestClient, committer: InMemoryCommitter
) -> None:
    auth = WRITER
    for group, batch, offsets in (
        ("a-clicks", 0, {"clicks": {"0": 10}}),
        ("a-orders", 0, {"orders": {"0": 60, "1": 80}}),
    ):
        body = {"group_id": group, "progress": _progress(group, batch, offsets)}
        assert client.post("/v1/progress", json=body, headers=auth).status_code == 200
    committer.fail_with = UnknownTopicPartition("no partition 9")
    body = {"group_id": "a-broken", "progress": _progress("a-broken", 0, {"orders": {"9": 1}})}
    assert client.post("/v1/progress", json=body, headers=auth).status_code == 200

    def page() -> str:
        answer = client.get("/ui", headers=basic("ops-secret-000001"))
        assert answer.status_code == 200, answer.text
        text = answer.text
        return text if all(f">{g}<" in text for g in ("a-clicks", "a-orders", "a-broken")) else ""

    broken = '<span class="badge ERR">ERR</span>'  # a group's badge (the chips say "ERR 1")
    html = wait_for(lambda: broken in (p := page()) and p, what="a-broken evaluated ERR")
    assert "unknown_topic_or_partition &times;" in html  # its failed commits, by reason
    names = re.findall(r'<b class="name">([^<]+)</b>', html)
    assert names[0] == "a-broken", names  # ERR first, then the lagging group, then OK
    assert names.index("a-orders") < names.index("a-clicks"), names
    assert "<script" not in html.lower()
    assert re.search(r'http-equiv="refresh" content="5"', html)
    assert ">40<" in html  # a-orders' total lag: 100 - 60 on partition 0
    answer = client.get("/ui", headers=basic("ops-secret-000001"))
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
    assert answer.headers["content-type"].startswith("text/html")


def _progress(group: str, batch: int, offsets: dict[str, dict[str, int]]) -> dict[str, object]:
    return spark_progress(batch, offsets, query=f"q-{group}-0000")


def test_tokens_and_read_grants_as_the_json_routes_with_basic_for_browsers(
    client: TestClient,
) -> None:
    for group in ("a-orders", "b-orders"):
        body = {"group_id": group, "progress": _progress(group, 0, {"orders": {"0": 5}})}
        answer = client.post(
            "/v1/progress", json=body, headers={"Authorization": "Bearer writer-secret-001"}
        )
        assert answer.status_code == 200, answer.text
    asked = client.get("/ui")
    assert asked.status_code == 401
    assert asked.headers["www-authenticate"].startswith('Basic realm="spark-offset-sidecar"')
    assert asked.json()["outcome"] == "unauthenticated"  # the one error body
    assert client.get("/ui", headers=basic("not-a-token")).status_code == 401
    assert client.get("/ui", headers={"Authorization": "Basic !!!"}).status_code == 401
    assert client.get("/ui", headers=basic("writer-secret-001")).status_code == 403  # no read grant

    def everyone() -> str:
        return client.get("/ui", headers=basic("ops-secret-000001")).text

    page = wait_for(lambda: ">b-orders<" in (t := everyone()) and t, what="both groups")
    assert ">a-orders<" in page
    team_a = client.get("/ui", headers={"Authorization": "Bearer team-a-secret-0001"}).text
    assert ">a-orders<" in team_a
    assert "b-orders" not in team_a
    # The JSON API still challenges with Bearer.
    assert client.get("/v1/status").headers["www-authenticate"] == "Bearer"


def test_a_page_builds_the_reports_of_its_own_groups_only(client: TestClient) -> None:
    """120 groups, three pages worst first: each page counts and orders every group from
    their summaries and builds the reports of the groups it shows, no others."""
    for i in range(120):  # orders/0 ends at 100: a-g000 lags 100, a-g100.. lag 0
        group = f"a-g{i:03}"
        body = {"group_id": group, "progress": _progress(group, 0, {"orders": {"0": i}})}
        assert client.post("/v1/progress", json=body, headers=WRITER).status_code == 200
    ops = {"Authorization": "Bearer ops-secret-000001"}

    def evaluated() -> bool:
        groups = client.get("/v1/status", headers=ops).json()["groups"]
        return len(groups) == 120 and all(g["totallag"] is not None for g in groups)

    wait_for(evaluated, what="every group evaluated")
    reports = watcher_reports(client)
    built: list[list[str]] = []
    every = reports.every

    async def spied(group_ids: list[str] | None = None) -> object:
        built.append(list(group_ids) if group_ids is not None else ["<every group>"])
        return await every(group_ids)

    reports.every = spied
    try:
        pages = []
        for page in (1, 2, 3):
            html = client.get(f"/ui?page={page}", headers=basic("ops-secret-000001")).text
            assert "120 consumer groups" in html
            pages.append(re.findall(r'<b class="name">([^<]+)</b>', html))
    finally:
        reports.every = every
    assert pages[0] == [f"a-g{i:03}" for i in range(50)]  # the laggiest first
    assert pages[1] == [f"a-g{i:03}" for i in range(50, 100)]
    assert pages[2] == [f"a-g{i:03}" for i in range(100, 120)]  # no lag: by name
    assert built == pages, "a page builds the reports of the groups it shows, no others"


def test_a_groups_summary_says_what_its_report_says(client: TestClient) -> None:
    for group, offsets in (
        ("a-lag", {"orders": {"0": 60, "1": 80}}),
        ("a-none", {"clicks": {"0": 10}}),
    ):
        body = {"group_id": group, "progress": _progress(group, 0, offsets)}
        assert client.post("/v1/progress", json=body, headers=WRITER).status_code == 200
    reports = watcher_reports(client)

    def both_lags_read() -> bool:
        # A group first evaluated before its partitions' ends are read has total_lag None
        # (unknown), which is right: wait for an evaluation that knows every end.
        summaries = client.portal.call(reports.summaries)
        return len(summaries) == 2 and all(s.total_lag is not None for s in summaries)

    wait_for(both_lags_read, what="both evaluated with every partition's end read")
    summaries = {s.group_id: s for s in client.portal.call(reports.summaries)}
    for report in client.portal.call(reports.every):
        told, summary = summary_of(report), summaries[report.status.group_id]
        # As of the same figures (an evaluation between the two reads moves only times).
        assert (told.status, told.data_status, told.total_lag) == (
            summary.status,
            summary.data_status,
            summary.total_lag,
        )
    assert summaries["a-lag"].total_lag == 40
    assert summaries["a-none"].total_lag == 0


def test_pages_are_answered_at_most_as_often_as_the_setting_says(tmp_path: Path) -> None:
    """A page left reloading back to back takes its turn: 4 pages at 2 a second cannot
    all be answered in less than 1.5 s (the first at once, each next 0.5 s later)."""
    settings = settings_for(tmp_path, ui_max_pages_per_second=2)
    with TestClient(create_app(settings, doubles(settings))) as client:
        started = time.monotonic()
        for _ in range(4):
            assert client.get("/ui").status_code == 200
        assert time.monotonic() - started >= 1.5
        assert client.app.state.runtime.pages is client.app.state.runtime.pages  # one pace


def test_a_pages_rows_follow_what_they_show_when_an_evaluation_ends_between_two_reads() -> None:
    """Reports of an evaluation that ended after the page's summaries were read (the
    summaries put a-clicks first; a-broken's report now says ERR): the rows go by what
    the reports say, the ERR one first, as its badge says."""

    def report(group: str, status: Status, failures: int) -> GroupReport:
        group_status = GroupStatus(group, f"q-{group}", status, 1.0, 0, failures, 90.0, ())
        return GroupReport(group_status, NOT_REPORTED, 0, 100.0, 99.0)

    newer = [report("a-clicks", Status.OK, 0), report("a-broken", Status.ERR, 3)]
    rows = in_rank_order(newer)
    assert [r.status.group_id for r in rows] == ["a-broken", "a-clicks"]
