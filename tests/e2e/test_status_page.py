"""The status page in a real headless browser (Debian's Chromium, installed by
``make system-deps``), on a real service committing to the real broker, with tokens: the
browser logs in with HTTP Basic (the token as the password), renders the page, and the
groups appear with their states. The screenshot is kept in ``.local/status-page.png`` for
a person to look at."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.machine import ROOT, refuse_in_inner_loop
from harness.service_process import ServiceProcess
from tests.support.kafka import delete_records, produce, run_sync, unique_group
from tests.support.scenarios import three_groups
from tests.support.service import spark_progress, wait_for

READER, WRITER = "ops-reads-everything-01", "jobs-write-everything-1"
TOKENS = {
    "tokens": [
        {"name": "ops", "token": READER, "read": ["*"]},
        {"name": "jobs", "token": WRITER, "write": ["*"]},
    ]
}

pytestmark = pytest.mark.tools  # Chromium


def chromium(*args: str) -> str:
    """Run headless Chromium; its standard output."""
    refuse_in_inner_loop("runs Chromium (a Debian package)")
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is missing: run `make system-deps` (Debian's chromium package)")
    done = subprocess.run(
        [found, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def data_status(service: ServiceProcess, group: str, headers: dict[str, str]) -> Any:
    return service.http.get(f"/v1/status/{group}", headers=headers).json().get("data_status")


def log_start(service: ServiceProcess, group: str, headers: dict[str, str]) -> Any:
    view = service.http.get(f"/v1/status/{group}", headers=headers).json()
    return view["partitions"][0]["log_start_offset"] if view.get("partitions") else None


def test_the_status_page_in_a_real_browser(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Any
) -> None:
    (tmp_path / "tokens.json").write_text(json.dumps(TOKENS))
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        tokens_file=tmp_path / "tokens.json",
        lag_read_interval_seconds=1,
        status_stop_after_seconds=3,
        status_err_after_failures=2,
        retry_initial_seconds=0.5,
        retry_max_seconds=1,
    ).start()
    service.http.headers["Authorization"] = f"Bearer {WRITER}"
    try:
        healthy, stopped, failing = three_groups(service, kafka_bootstrap, new_topic(1))
        wanted = {healthy: "OK", stopped: "STOP", failing: "ERR"}
        reader = {"Authorization": f"Bearer {READER}"}

        def settled() -> bool:
            answer = service.http.get("/v1/status", headers=reader).json()
            return {g["group"]: g["status"] for g in answer["groups"]} == wanted

        wait_for(settled, timeout=60, what=f"the groups' states {wanted}")
        # A fourth group whose unread records are deleted (DeleteRecords): LOST.
        topic = new_topic(1)
        run_sync(produce(kafka_bootstrap, topic, 20))
        lost = unique_group("lost")
        answer = service.post_progress(lost, spark_progress(0, {topic: {"0": 5}}, query=lost))
        assert answer.status_code == 200, answer.text
        wait_for(lambda: log_start(service, lost, reader) == 0, what="a first read")
        run_sync(delete_records(kafka_bootstrap, topic, 0, 10))
        wait_for(lambda: data_status(service, lost, reader) == "LOST", what="LOST")
        wait_for(
            lambda: service.http.get(f"/v1/status/{stopped}", headers=reader).json()["lag_seconds"],
            what="the stopped group's time lag",
        )
        page = f"http://ops:{READER}@127.0.0.1:{service.port}/ui"
        dom = chromium("--dump-dom", page)
        shown = dict(
            re.findall(
                r'<b class="name">([^<]+)</b>.*?<span class="badge \w+">(\w+)</span>', dom, re.S
            )
        )
        # The lost group's status is OK or, once its records wait long enough, STOP.
        assert shown.pop(lost) in ("OK", "STOP"), dom[:3000]
        assert shown == wanted, dom[:3000]
        names = re.findall(r'<b class="name">([^<]+)</b>', dom)
        assert names[0] == failing  # the worst first
        assert set(names[1:3]) == {stopped, lost}
        assert names[3] == healthy
        rows = dict(zip(names, dom.split('<b class="name">')[1:], strict=True))
        assert '<span class="badge LOST">LOST</span>' in rows[lost]
        assert "5 records lost" in rows[lost]
        assert "unknown" not in rows[stopped].split("</tr>")[0]  # its time lag is known
        assert "caught up" in rows[healthy]
        assert "unknown_topic_or_partition" in dom  # the failing group's reason
        assert "<script" not in dom.lower()
        # Without the token the browser is asked for it, and sees no group.
        refused = chromium("--dump-dom", f"http://127.0.0.1:{service.port}/ui")
        assert healthy not in refused
        shot = tmp_path / "status-page.png"
        chromium("--window-size=1280,900", f"--screenshot={shot}", page)
        assert shot.stat().st_size > 10_000
        kept = ROOT / ".local" / "status-page.png"
        kept.parent.mkdir(exist_ok=True)
        shutil.copy(shot, kept)
    finally:
        service.stop()
