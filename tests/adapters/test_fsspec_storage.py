"""``FsspecCheckpointStorage`` against a real local folder and real object store server
processes: S3 (moto's server mode), Azure Blob / ADLS Gen2 (Azurite, as ``abfs://`` and
Hadoop's ``abfss://container@account...``) and Google Cloud Storage (fake-gcs-server, as
``gs://``): the port's contract on each."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.object_stores import AzuriteServer, FakeGcsServer
from harness.s3_server import S3Server
from spark_offset_sidecar.adapters.checkpoints.fsspec_storage import (
    FsspecCheckpointStorage,
    check_path,
)
from spark_offset_sidecar.errors import CheckpointReadError, UnreadableCheckpoint

Write = Callable[[str, str], None]


@pytest.fixture(params=["local", "s3", "abfs", "abfss", "gs"])
def place(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[FsspecCheckpointStorage, str, Write]:
    """(storage, a folder's URL, write(relative path, text))."""
    if request.param == "local":

        def write_local(name: str, text: str) -> None:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)

        return FsspecCheckpointStorage(), str(tmp_path), write_local
    bucket = f"ckpt-{uuid.uuid4().hex[:10]}"
    if request.param == "s3":
        server: S3Server = request.getfixturevalue("s3_server")
        client = server.client()
        client.create_bucket(Bucket=bucket)

        def write_s3(name: str, text: str) -> None:
            client.put_object(Bucket=bucket, Key=f"job/{name}", Body=text.encode())

        return FsspecCheckpointStorage(server.storage_options()), f"s3://{bucket}/job", write_s3
    store: AzuriteServer | FakeGcsServer = request.getfixturevalue(
        "gcs_server" if request.param == "gs" else "azurite_server"
    )
    fs = store.filesystem()
    fs.mkdir(bucket)

    def write(name: str, text: str) -> None:
        fs.pipe_file(f"{bucket}/job/{name}", text.encode())

    url = {
        "abfs": f"abfs://{bucket}/job",
        "abfss": f"abfss://{bucket}@devstoreaccount1.dfs.core.windows.net/job",
        "gs": f"gs://{bucket}/job",
    }[request.param]
    return FsspecCheckpointStorage(store.storage_options()), url, write


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
    # and on an object store, once: is the bucket there? (after the first missing file)
    assert storage.requests == 6 + (not folder.startswith("/"))


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


@pytest.mark.parametrize("where", ["s3", "abfs", "gs"])
def test_a_bucket_or_container_that_does_not_exist_is_an_error_not_an_empty_folder(
    where: str, request: pytest.FixtureRequest
) -> None:
    """A folder in a missing bucket can never get Spark's files: the read names the bucket
    (a folder still to be written in a bucket that exists stays "not there yet")."""
    server = request.getfixturevalue({"s3": "s3_server", "abfs": "azurite_server",
                                      "gs": "gcs_server"}[where])  # fmt: skip
    storage = FsspecCheckpointStorage(server.storage_options())
    missing = f"nothere-{uuid.uuid4().hex[:8]}"
    for read in (
        lambda: storage.read_text(f"{where}://{missing}/job/metadata"),
        lambda: storage.batch_ids(f"{where}://{missing}/job/commits"),
    ):
        with pytest.raises(CheckpointReadError) as refused:
            read()
        assert refused.value.reason == "unreachable"
        assert f"no bucket or container '{missing}'" in str(refused.value)


def test_a_wrong_azure_key_is_denied(azurite_server: AzuriteServer) -> None:
    """Azurite checks the account key as Azure does: a wrong one is ``denied``, and the
    key itself is not in the message."""
    wrong_key = (
        "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQQ=="
    )
    storage = FsspecCheckpointStorage(azurite_server.storage_options(wrong_key))
    azurite_server.filesystem().mkdir("keyed")
    with pytest.raises(CheckpointReadError) as refused:
        storage.read_text("abfs://keyed/job/metadata")
    assert refused.value.reason == "denied", refused.value
    assert wrong_key not in str(refused.value)
