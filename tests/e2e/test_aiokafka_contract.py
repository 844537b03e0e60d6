"""The contract of the one door below aiokafka's public API (``adapters/kafka/wire.py``):
its functions run in a virtual environment with nothing but the newest aiokafka release on
PyPI (``harness.aiokafka_releases``; the project's own release too, when it is older),
against every Kafka version the project supports: a coordinator looked up, offsets
committed with metadata over a lane of our own and read back (OffsetFetch, and by the
suite's own client), the group described, log ends and starts read, a topic that does not
exist described without creating it, and the refusing OAUTHBEARER authenticator installed
and stepped (``check_the_door``, run by ``tests/e2e/test_kafka_versions.py`` on each
version's broker, after the service's test there: one broker start per version for
both); and our stubs of aiokafka (``stubs/aiokafka``) checked against that release by
mypy's stubtest (here). A new aiokafka release that moves what the door relies on fails
there, by name, before the pin in pyproject.toml is widened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version as installed
from pathlib import Path
from typing import Any

import pytest

from harness import aiokafka_releases
from harness.machine import ROOT, free_port
from tests.support.kafka import create_topics, produce, read_committed, run_sync, unique_group

pytestmark = pytest.mark.kafka

UNKNOWN_TOPIC = 3  # UNKNOWN_TOPIC_OR_PARTITION
SCRIPT = ROOT / "tests" / "support" / "door_contract.py"
ALLOWED = ("--allowlist", str(ROOT / "stubs" / "aiokafka-allowlist.txt"))


@pytest.fixture(scope="module")
def newest_aiokafka() -> str:
    return aiokafka_releases.newest()


def check_the_door(which: str, bootstrap: str) -> None:
    """The door's contract with aiokafka ``which`` ("newest" on PyPI; "pinned": the
    project's own, skipped when it is the newest) against the broker at ``bootstrap``."""
    newest = aiokafka_releases.newest()
    release = newest if which == "newest" else installed("aiokafka")
    if which == "pinned" and release == newest:
        pytest.skip(f"the project's aiokafka, {release}, is the newest")
    read = _contract(aiokafka_releases.aiokafka_python(release), bootstrap)
    print(f"aiokafka {read['aiokafka']} on {bootstrap}: {read}")
    assert read["aiokafka"] == release
    node, host, port, known = read["coordinator"]
    assert known == [host, port]
    assert f"{host}:{port}" == read["bootstrap"]
    assert node >= 0
    topic = read["topic"]
    assert _in_any_order(read["answer"]) == [(topic, [[0, 0], [1, 0]])]
    assert read["lane_was_connected"] is True
    committed = _in_any_order(read["committed"])
    assert committed == [(topic, [[0, 3, '{"committer":"door-contract"}'], [1, 4, ""]])]
    assert read["read_by_the_suite"] == {
        f"{topic}/0": [3, '{"committer":"door-contract"}'],
        f"{topic}/1": [4, ""],
    }, "the suite's own client reads the same"
    assert read["group"] == ["Empty", 0]
    latest = {int(p): o for p, o in read["ends"]["latest"].items()}
    assert sorted(latest) == [0, 1]
    assert sum(latest.values()) == 20
    assert read["ends"]["earliest"] == {"0": 0, "1": 0}
    assert read["absent"] == [UNKNOWN_TOPIC, UNKNOWN_TOPIC], "described, not created"
    oauth = read["oauth"]
    assert oauth["authenticator"] == "RefusingOAuthAuthenticator"
    assert oauth["first"] == ["n,,\x01auth=Bearer a-token\x01logicalCluster=lkc-1\x01\x01", True]
    assert "invalid_token" in oauth["refused"]
    assert oauth["forgotten"] == 1
    assert oauth["accepted"] is None


def test_our_stubs_match_the_newest_aiokafka(newest_aiokafka: str) -> None:
    """``stubs/aiokafka`` (what mypy checks the service's calls against) says what the
    newest release has: mypy's stubtest, with the release's aiokafka imported."""
    python = aiokafka_releases.aiokafka_python(newest_aiokafka)
    where = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "aiokafka", "--ignore-missing-stub", *ALLOWED],
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": str(ROOT / "stubs"), "PYTHONPATH": where},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _in_any_order(topics: list[list[Any]]) -> list[tuple[str, list[Any]]]:
    """Per topic, its partitions' rows sorted: Kafka does not promise to answer them in the
    order asked. Kafka 3.9's group coordinator (the classic one, its default) answers
    OffsetCommit and OffsetFetch in the order of a hash map keyed by topic name and
    partition, so the order changes with the topic's name (``door-<free port>``)."""
    return [(topic, sorted(rows)) for topic, rows in topics]


def _contract(python: Path, bootstrap: str) -> dict[str, Any]:
    """What ``door_contract.py`` read with ``python``'s aiokafka, and what the suite's own
    client reads of the same group."""
    topic, group = f"door-{free_port()}", unique_group("door")
    run_sync(create_topics(bootstrap, [topic], 2))
    run_sync(produce(bootstrap, topic, 20))  # keys spread them over both partitions
    done = subprocess.run(
        [str(python), str(SCRIPT), bootstrap, topic, group],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "service"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read: dict[str, Any] = json.loads(done.stdout)
    suite = run_sync(read_committed(bootstrap, group))
    read.update(
        bootstrap=bootstrap,
        topic=topic,
        read_by_the_suite={f"{t}/{p}": list(c) for (t, p), c in suite.items()},
    )
    return read
