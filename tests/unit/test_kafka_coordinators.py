"""Which partition of __consumer_offsets holds a group (Kafka's own formula, checked
against Kafka's coordinators in tests/e2e/test_kafka_cluster.py), and how a dead broker is
said: once, while groups wait on it."""

from __future__ import annotations

import logging

import pytest

from spark_offset_sidecar.adapters.kafka.offsets_topic import java_string_hash, partition_for
from spark_offset_sidecar.adapters.kafka.unreachable_brokers import UnreachableBrokers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 99162322),  # Java: "hello".hashCode()
        ("polygenelubricants", -(2**31)),  # the string whose hashCode is Integer.MIN_VALUE
        ("é", 233),
        ("😀", 0xD83D * 31 + 0xDE00),  # a surrogate pair: two UTF-16 code units
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_takes_abs_and_min_value_as_zero() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    negative = next(
        g for g in (f"spark-job-group-{i}" for i in range(1000)) if java_string_hash(g) < 0
    )
    assert partition_for(negative, 50) == abs(java_string_hash(negative)) % 50
    assert {partition_for(f"group-{i}", 1) for i in range(100)} == {0}


def test_a_dead_broker_is_said_once_and_listed_while_groups_wait_on_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    brokers = UnreachableBrokers()
    caplog.set_level(logging.INFO)
    for attempt in range(20):
        for group in ("a", "b", "c"):
            brokers.missed(group, 2, "127.0.0.1:9093", now=100 + attempt)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "broker 2 (127.0.0.1:9093)" in warnings[0].getMessage()
    assert brokers.nodes() == [2]
    problem = brokers.problem(now=119)
    assert problem is not None
    assert "broker 2 (127.0.0.1:9093) cannot be reached for 19 s" in problem
    assert "3 group(s)" in problem
    brokers.reached("a", 1, now=120)  # moved to broker 1
    brokers.reached("b", 3, now=120)
    assert brokers.nodes() == [2], "c still waits on broker 2"
    brokers.reached("c", 1, now=121)
    assert brokers.nodes() == []
    assert brokers.problem(now=121) is None
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == [
        "Kafka broker 2: no group waits on it any more, 21.0 s after it could not be reached"
    ]


def test_a_broker_back_releases_every_group_that_waited_on_it() -> None:
    brokers = UnreachableBrokers()
    for group in ("a", "b"):
        brokers.missed(group, 2, "", now=0)
    brokers.missed("c", 3, "", now=0)
    brokers.reached("a", 2, now=5)  # broker 2 answers again
    assert brokers.nodes() == [3]
    brokers.missed("c", 2, "", now=6)  # c's coordinator is now 2, and 2 is gone again
    assert brokers.nodes() == [2]


def test_a_group_waiting_on_a_dead_broker_says_which_until_it_commits() -> None:
    brokers = UnreachableBrokers()
    brokers.missed("a", 2, "127.0.0.1:9093", now=100)
    brokers.missed("b", 3, "", now=101)
    waiting = brokers.waiting_on("a", now=104)
    assert waiting is not None
    assert waiting.startswith(
        "its coordinator, broker 2 (127.0.0.1:9093), cannot be reached for 4 s"
    )
    assert "broker.session.timeout.ms" in waiting
    assert brokers.waiting_on("c", now=104) is None, "a group that never missed waits on nothing"
    brokers.reached("a", 1, now=109)  # Kafka named broker 1
    assert brokers.waiting_on("a", now=110) is None
    assert brokers.waiting_on("b", now=110) == (
        "its coordinator, broker 3, cannot be reached for 9 s: Kafka names a new coordinator "
        "once it fences the broker (broker.session.timeout.ms, 9 s by default)"
    )
