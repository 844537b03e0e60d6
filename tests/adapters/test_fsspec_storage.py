"""``FsspecCheckpointStorage`` against a real local folder and a real S3-compatible
server process (moto's server mode): the port's contract on both."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.s3_server import S3Server
from spark_offset_sidecar.adapters.checkpoints.fsspec_storage import (
    FsspecCheckpointStorage,
    check_path,
)
from spark_offset_sidecar.errors import CheckpointReadError, UnreadableCheckpoint

Write = Callable[[str, str], None]


@pytest.fixture(params=["local", "s3"])
def place(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[FsspecCheckpointStorage, str, Write]:
    """(storage, a folder's URL, write(relative path, text))."""
    if request.param == "local":

        def write_local(name: str, text: str) -> None:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)

        return FsspecCheckpointStorage(), str(tmp_path), write_local
    server: S3Server = request.getfixturevalue("s3_server")
    bucket = f"ckpt-{uuid.uuid4().hex[:10]}"
    client = server.client()
    client.create_bucket(Bucket=bucket)

    def write_s3(name: str, text: str) -> None:
        client.put_object(Bucket=bucket, Key=f"job/{name}", Body=text.encode())

    return FsspecCheckpointStorage(server.storage_options()), f"s3://{bucket}/job", write_s3


def test_reads_lists_and_probes_what_is_there(
    place: tuple[FsspecCheckpointStorage, str, Write],
) -> None:
    storage, folder, write = place
    write("metadata", '{"id":"q"}')
    for name in ("offsets/0", "offsets/1", "offsets/10", "offsets/.1.crc", "offsets/.2.x.tmp"):
        write(name, "v1\n{}")
    assert storage.read_text(f"{folder}/metadata") == '{"id":"q"}'
    assert storage.read_text(f"{folder}/offsets/2") is None
    assert storage.exists(f"{folder}/offsets/10")
    assert not storage.exists(f"{folder}/offsets/11")
    assert sorted(storage.batch_ids(f"{folder}/offsets")) == [0, 1, 10]
    assert storage.batch_ids(f"{folder}/commits") == []  # no folder yet
    assert storage.requests == 6


def test_a_new_file_is_seen_by_the_next_listing(
    place: tuple[FsspecCheckpointStorage, str, Write],
) -> None:
    storage, folder, write = place
    write("commits/0", "v1\n{}")
    assert storage.batch_ids(f"{folder}/commits") == [0]
    write("commits/1", "v1\n{}")
    assert sorted(storage.batch_ids(f"{folder}/commits")) == [0, 1]  # no stale cache


def test_an_unreachable_server_is_a_read_error_with_its_reason() -> None:
    server = S3Server().start()
    storage = FsspecCheckpointStorage(server.storage_options())
    server.client().create_bucket(Bucket="gone")
    assert storage.read_text("s3://gone/job/metadata") is None
    server.stop()
    for call in (storage.read_text, storage.batch_ids):
        with pytest.raises(CheckpointReadError) as failed:
            call("s3://gone/job/metadata")
        assert failed.value.reason == "unreachable"
        assert "s3://gone/job/metadata" in str(failed.value)


def test_paths_the_service_cannot_read_are_named() -> None:
    assert check_path("/var/checkpoints/job") is None
    assert check_path("s3a://bucket/job") is None
    assert "not a filesystem this service knows" in (check_path("nope://x/y") or "")


# Hostile local files cost their own read only, at once: each call runs in a thread
# with a bound, so a regression (a read that waits for a pipe's writer) fails the test
# instead of hanging the suite.
def _within(seconds: float, call: Callable[[], object]) -> object:
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result(timeout=seconds)


def test_a_pipe_or_a_folder_in_place_of_a_file_is_refused_without_waiting(tmp_path: Path) -> None:
    storage = FsspecCheckpointStorage()
    os.mkfifo(tmp_path / "offsets-pipe")
    (tmp_path / "offsets-folder").mkdir()
    for name, kind in (("offsets-pipe", "a pipe"), ("offsets-folder", "a folder")):
        path = str(tmp_path / name)
        assert _within(5, lambda p=path: storage.exists(p)) is True  # type: ignore[misc]
        with pytest.raises(UnreadableCheckpoint, match=kind):
            _within(5, lambda p=path: storage.read_text(p))  # type: ignore[misc]


def test_a_huge_file_is_refused_after_reading_its_limit_only(tmp_path: Path) -> None:
    huge = tmp_path / "offsets" / "7"
    huge.parent.mkdir()
    with huge.open("wb") as sparse:  # a 4 GiB file that takes no disk
        sparse.truncate(4 * 2**30)
    with pytest.raises(UnreadableCheckpoint, match=r"over 16 MiB"):
        _within(30, lambda: FsspecCheckpointStorage().read_text(str(huge)))


def test_a_symlink_loop_is_the_systems_error_named(tmp_path: Path) -> None:
    (tmp_path / "offsets").symlink_to(tmp_path / "offsets")
    storage = FsspecCheckpointStorage()
    with pytest.raises(CheckpointReadError, match="symbolic links"):
        _within(5, lambda: storage.batch_ids(str(tmp_path / "offsets")))
    with pytest.raises(CheckpointReadError, match="symbolic links"):
        _within(5, lambda: storage.read_text(str(tmp_path / "offsets" / "0")))
