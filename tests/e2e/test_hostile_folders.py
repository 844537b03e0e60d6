"""Hostile checkpoint folders cost only themselves: the real service (SQLite and
PostgreSQL) follows good folders that keep growing, a folder rewritten while it is read,
and folders with an unstorable topic name, a huge offsets file, a symlink loop, a pipe or
a folder where a file should be; HTTP callers post events all along.

Each hostile folder shows its own error on ``GET /v1/followed-folders`` and ``/ui`` and
commits nothing; every good folder and every HTTP caller is committed."""

from __future__ import annotations

import html
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.service_process import ServiceProcess
from tests.support.checkpoints import COMMIT_LOG, offset_log, write_batch
from tests.support.kafka import committed_offsets, unique_group, wait_for_committed
from tests.support.service import assert_state_reads_answer, spark_progress, wait_for

pytestmark = pytest.mark.kafka

# name -> (how to make it in a folder holding metadata, words its error must have)
Maker = Callable[[Path, str], None]


def _with_offsets(text: str | bytes) -> Maker:
    def make(folder: Path, _topic: str) -> None:
        (folder / "offsets").mkdir()
        data = text.encode() if isinstance(text, str) else text
        (folder / "offsets" / "0").write_bytes(data)
        _commit(folder)

    return make


def _commit(folder: Path) -> None:
    (folder / "commits").mkdir(exist_ok=True)
    (folder / "commits" / "0").write_text(COMMIT_LOG)


def _huge(folder: Path, _topic: str) -> None:
    (folder / "offsets").mkdir()
    with (folder / "offsets" / "0").open("wb") as sparse:
        sparse.truncate(4 * 2**30)  # 4 GiB that take no disk
    _commit(folder)


def _loop(folder: Path, _topic: str) -> None:
    (folder / "offsets").symlink_to(folder / "offsets")
    _commit(folder)


def _pipe(folder: Path, _topic: str) -> None:
    (folder / "offsets").mkdir()
    os.mkfifo(folder / "offsets" / "0")
    _commit(folder)


def _folder_for_a_file(folder: Path, _topic: str) -> None:
    (folder / "offsets" / "0").mkdir(parents=True)
    _commit(folder)


HOSTILE: dict[str, tuple[Maker, str]] = {
    "surrogate-topic": (_with_offsets(offset_log('{"evil-\\ud800":{"0":5}}')), "lone surrogate"),
    "nul-topic": (_with_offsets(offset_log('{"evil\\u0000":{"0":5}}')), "control character"),
    "not-utf8-topic": (
        _with_offsets(offset_log("x").encode().replace(b"x", b'{"evil-\xed\xa0\x80":{"0":5}}')),
        "may only have",
    ),
    "huge-offsets-file": (_huge, "over 16 MiB"),
    "symlink-loop": (_loop, "symbolic links"),
    "pipe-for-a-file": (_pipe, "a pipe"),
    "folder-for-a-file": (_folder_for_a_file, "a folder"),
}


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str, database_url: str) -> Iterator[ServiceProcess]:
    process = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        database_url=database_url,
        follow_interval_seconds=0.3,
        follow_read_timeout_seconds=3,
    )
    yield process.start()
    process.stop()


def _follow(service: ServiceProcess, path: Path, group: str) -> None:
    answer = service.http.post("/v1/followed-folders", json={"path": str(path), "group_id": group})
    assert answer.status_code == 201, answer.text


class Writers(threading.Thread):
    """Batches written into the good folders and a folder rewritten while it is read
    (each ``offsets/N`` first written half, then whole), and HTTP events posted, until
    ``rounds`` are done."""

    def __init__(self, service: ServiceProcess, root: Path, topic: str, rounds: int) -> None:
        super().__init__(daemon=True)
        self.service, self.topic, self.rounds = service, topic, rounds
        self.good = {root / f"good-{i}": unique_group("good") for i in range(2)}
        self.rewritten = (root / "rewritten", unique_group("rewritten"))
        self.callers = [unique_group("caller") for _ in range(5)]
        self.answers: list[tuple[int, str]] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.service.url, timeout=30) as client:
                for batch in range(self.rounds):
                    self._round(client, batch)
                    time.sleep(0.1)
        except BaseException as exc:  # reported by the test
            self.failure = exc

    def _round(self, client: httpx.Client, batch: int) -> None:
        source = f'{{"{self.topic}":{{"0":{batch * 10}}}}}'
        for folder in self.good:
            write_batch(folder, f"query-{folder.name}", batch, source)
        folder = self.rewritten[0]
        whole = offset_log(source)
        write_batch(folder, "query-rewritten", batch, source)
        (folder / "offsets" / str(batch)).write_text(whole[: len(whole) // 2])  # half again
        time.sleep(0.05)
        (folder / "offsets" / str(batch)).write_text(whole)
        for group in self.callers:
            event = spark_progress(batch, {self.topic: {"0": batch * 10}}, query=f"q-{group}")
            answer = client.post("/v1/progress", json={"group_id": group, "progress": event})
            self.answers.append((answer.status_code, answer.text[:200]))


def test_hostile_folders_fail_alone(
    service: ServiceProcess,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic = new_topic(1)
    root = tmp_path / "checkpoints"
    writers = Writers(service, root, topic, rounds=25)
    hostile_groups = {}
    for name, (make, _words) in HOSTILE.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "metadata").write_text(f'{{"id":"query-{name}-{uuid.uuid4().hex[:6]}"}}')
        make(folder, topic)
        hostile_groups[name] = unique_group(name)
        _follow(service, folder, hostile_groups[name])
    for folder, group in [*writers.good.items(), writers.rewritten]:
        write_batch(folder, f"query-{folder.name}", 0, f'{{"{topic}":{{"0":0}}}}')
        _follow(service, folder, group)

    writers.start()
    writers.join(120)
    assert writers.failure is None, writers.failure
    assert not writers.is_alive()

    last = {(topic, 0): (writers.rounds - 1) * 10}
    groups = [*writers.good.values(), writers.rewritten[1], *writers.callers]
    wait_for_committed(kafka_bootstrap, groups, last)
    assert all(status == 200 for status, _ in writers.answers), writers.answers[:5]

    def folders() -> dict[str, Any]:
        listed = service.http.get("/v1/followed-folders")
        assert listed.status_code == 200, listed.text
        return {Path(f["path"]).name: f for f in listed.json()}

    for name, (_make, words) in HOSTILE.items():
        wait_for(
            lambda n=name, w=words: w in (folders()[n]["last_error"] or ""),  # type: ignore[misc]
            what=f"{name}'s error ({words!r}) on /v1/followed-folders",
        )
    listed = folders()
    page = service.http.get("/ui")
    assert page.status_code == 200
    for name in HOSTILE:
        assert listed[name]["last_batch_recorded"] is None, f"{name} recorded a batch"
        assert listed[name]["errors"], name
        assert html.escape(listed[name]["last_error"]) in page.text, f"{name}'s error on /ui"
        assert committed_offsets(kafka_bootstrap, hostile_groups[name]) == {}, name
    for folder in writers.good:
        assert listed[folder.name]["last_error"] is None
        assert listed[folder.name]["last_batch_recorded"] == writers.rounds - 1
    assert_state_reads_answer(service.http)


@pytest.mark.parametrize(
    ("where", "wrong"),
    [("s3", "bucket"), ("abfs", "bucket"), ("gs", "bucket"), ("abfs", "key")],
)
def test_a_missing_bucket_or_wrong_credentials_show_on_the_first_poll(
    where: str,
    wrong: str,
    kafka_bootstrap: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """A folder on a bucket or container that does not exist, or read with credentials
    the store refuses, is registered (201: the bucket may be made later) and its error is
    on ``GET /v1/followed-folders`` and ``/ui`` from the first poll on, never "no
    checkpoint yet" in silence; the credentials are in neither."""
    server = request.getfixturevalue(
        {"s3": "s3_server", "abfs": "azurite_server", "gs": "gcs_server"}[where]
    )
    bucket = f"nothere-{uuid.uuid4().hex[:8]}"
    options = server.storage_options()
    if wrong == "key":
        bucket = f"there-{uuid.uuid4().hex[:8]}"
        server.filesystem().mkdir(bucket)
        options = server.storage_options("QUFB" * 21 + "QQ==")  # well formed, not the key
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        follow_interval_seconds=0.5,
        checkpoint_storage_options=json.dumps(options),
    ).start()
    try:
        path = f"{where}://{bucket}/job"
        answer = service.http.post(
            "/v1/followed-folders", json={"path": path, "group_id": unique_group("nb")}
        )
        assert answer.status_code == 201, answer.text

        def status() -> dict[str, Any]:
            return next(f for f in service.http.get("/v1/followed-folders").json())

        # the first poll's outcome, whichever it is: a poll that fails counts an error, one
        # that reads the folder (no checkpoint yet included) sets last_poll_at
        wait_for(
            lambda: status()["errors"] or status()["last_poll_at"] is not None,
            what="the first poll",
        )
        first = status()
        expected = {"bucket": ("unreachable", f"no bucket or container '{bucket}'"),
                    "key": ("denied", "failed to authenticate")}[wrong]  # fmt: skip
        assert expected[0] in first["errors"], first
        assert expected[1] in (first["last_error"] or ""), first
        # As of a later poll with a child watcher (told every second): an error's own
        # request id and time aside, the same words.
        words = html.escape(first["last_error"].split("\nRequestId:")[0])
        page = wait_for(
            lambda: (p := service.http.get("/ui")).status_code == 200 and words in p.text and p,
            what="the folder's error on /ui",
        )
        settings = options[next(iter(options))]
        secrets = [settings.get("secret"), *_account_keys(settings.get("connection_string"))]
        for shown in (json.dumps(first), page.text, service.log.read_text()):
            assert not [s for s in secrets if s and s in shown], "credentials shown"
    finally:
        service.stop()


def _account_keys(connection_string: str | None) -> list[str]:
    parts = (connection_string or "").split(";")
    return [p.split("=", 1)[1] for p in parts if p.startswith("AccountKey=")]
