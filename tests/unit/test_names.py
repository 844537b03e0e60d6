"""The one definition of a valid name (core.names): every rule N1-N4 with examples, and
properties over any text (lone surrogates and control characters included): a name a rule
accepts can be stored and answered; the schema's pattern agrees with the rule."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_offset_sidecar.core import names
from spark_offset_sidecar.errors import InvalidEvent, UnreadableCheckpoint, shown

RULES = [
    names.GROUP_ID,
    names.QUERY_ID,
    names.RUN_ID,
    names.TOPIC,
    names.FOLDER_PATH,
    names.GRANT_PATTERN,
    names.TOKEN_NAME,
]
# Any code point, lone surrogates and control characters included (hypothesis leaves
# surrogates out of text unless asked).
ANY_TEXT = st.text(st.characters(codec=None, categories=None, exclude_categories=()), max_size=40)
# Kafka's own topic rule (org.apache.kafka.common.internals.Topic.validate).
KAFKA_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.kind)
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("evil-\ud800", "lone surrogate (U+D800) at position 5"),
        ("evil-\udfff", "lone surrogate (U+DFFF) at position 5"),
        ("evil-\x00", "control character (U+0000) at position 5"),
        ("a\nb", "control character (U+000A) at position 1"),
        ("a\x7f", "control character (U+007F) at position 1"),
        ("", "must have 1 to"),
        (None, "must be a string"),
        (42, "must be a string"),
    ],
)
def test_every_rule_refuses_what_no_store_can_hold(
    rule: names.NameRule, value: object, says: str
) -> None:
    problem = rule.problem(value)
    assert problem is not None
    assert says in problem, problem
    assert problem.startswith(rule.kind)
    problem.encode("utf-8")  # the words themselves can be answered and logged


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.kind)
def test_every_rule_has_a_bound(rule: names.NameRule) -> None:
    assert rule.is_valid("a" * rule.max_length)
    assert f"must have 1 to {rule.max_length} characters" in (
        rule.problem("a" * (rule.max_length + 1)) or ""
    )


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (names.GROUP_ID, ["orders", "Équipe données/ingest", "a b*c"], []),
        (names.QUERY_ID, ["7d8c1a0e-1f7f-4a51-bb71-8f2c0b7d6b1e", "q.1:x_y"], ["a b", "é"]),
        (names.TOPIC, ["orders", "a.b_c-d", "..."], [".", "..", "a b", "a/b", "é", "t*"]),
    ],
    ids=["group id", "query id", "topic"],
)
def test_the_kinds_own_characters(rule: names.NameRule, good: list[str], bad: list[str]) -> None:
    assert [g for g in good if not rule.is_valid(g)] == []
    assert [b for b in bad if rule.is_valid(b)] == []


@given(ANY_TEXT)
def test_a_name_any_rule_accepts_can_be_stored_and_answered(value: str) -> None:
    for rule in RULES:
        if rule.is_valid(value):
            value.encode("utf-8")  # SQLite, PostgreSQL and JSON answers hold UTF-8
            assert "\x00" not in value
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        else:
            (rule.problem(value) or "").encode("utf-8")


@given(ANY_TEXT)
def test_topic_names_are_kafkas_own(value: str) -> None:
    kafka_would = bool(KAFKA_TOPIC.fullmatch(value)) and value not in {".", ".."}
    assert names.TOPIC.is_valid(value) == kafka_would


@given(ANY_TEXT)
def test_the_schema_pattern_agrees_with_the_rule(value: str) -> None:
    """The OpenAPI pattern is the rule less N1 and reserved names (a JSON Schema or pydantic
    pattern can name neither surrogates nor, without look-ahead, whole reserved names)."""
    for rule in RULES:
        in_schema = bool(re.fullmatch(rule.pattern, value)) and len(value) <= rule.max_length
        has_surrogate = any(0xD800 <= ord(c) <= 0xDFFF for c in value)
        expected = in_schema and not has_surrogate and value not in rule.reserved
        assert rule.is_valid(value) == expected, (rule.kind, value)


@given(ANY_TEXT)
def test_errors_quoting_any_input_can_be_answered(value: str) -> None:
    for error in (InvalidEvent(value, value), UnreadableCheckpoint(value, 1, value)):
        str(error).encode("utf-8")
    assert shown(value).encode("utf-8").decode("utf-8", "backslashreplace") == shown(value)
