"""Names the service accepts: the one definition, used at every edge (HTTP, progress
events, checkpoint files, the tokens file; the kinds: docs/api/index.md and below).

Rules every name keeps (one caller's name can never fail a batch of many callers' writes):
  N1 it is a ``str`` of Unicode scalar values: no lone surrogate (U+D800-U+DFFF), which
     UTF-8, and so no database or JSON answer, cannot hold.
  N2 it has no control character (U+0000-U+001F, U+007F): no NUL, no line break.
  N3 it has 1 to the kind's maximum characters.
  N4 it has only the kind's own characters, and is none of its reserved names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from spark_offset_sidecar.errors import shown

# N1 and N2 as one character class (Python's ``re``; the schema's pattern leaves N1 out,
# as JSON Schema's regexes and pydantic's cannot name surrogates: ``problem`` checks it).
_NOT_TEXT = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_ANY_TEXT = r"[^\x00-\x1f\x7f]"


@dataclass(frozen=True)
class NameRule:
    """What one kind of name may be (N1-N4)."""

    kind: str  # "group id": how its problems name it
    max_length: int
    characters: str = _ANY_TEXT  # N4: a regex class of the allowed characters
    characters_in_words: str = ""  # N4 said to a person ("" for any character)
    reserved: frozenset[str] = frozenset()

    @property
    def pattern(self) -> str:
        """The whole name as a regex: the OpenAPI schema's ``pattern`` (N2-N4)."""
        return f"^{self.characters}+$"

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not a valid name of this kind, in words, or None if it is."""
        if not isinstance(value, str):
            return f"{self.kind} must be a string"
        if not 1 <= len(value) <= self.max_length:
            return f"{self.kind} must have 1 to {self.max_length} characters, not {len(value)}"
        if bad := _NOT_TEXT.search(value):
            char = ord(bad.group())
            what = "a lone surrogate" if 0xD800 <= char <= 0xDFFF else "a control character"
            return (
                f"{self.kind} has {what} (U+{char:04X}) at position {bad.start()}: "
                "names must be Unicode text without control characters"
            )
        if self.characters_in_words and not self._allowed.fullmatch(value):
            return f"{self.kind} {shown(repr(value))} may only have {self.characters_in_words}"
        if value in self.reserved:
            return f"{self.kind} cannot be {value!r}"
        return None

    def is_valid(self, value: object) -> bool:
        return self.problem(value) is None

    @cached_property
    def _allowed(self) -> re.Pattern[str]:
        return re.compile(f"{self.characters}+")


_SPARK_ID = r"[A-Za-z0-9._:-]"
_SPARK_ID_IN_WORDS = "ASCII letters, digits, '.', '_', ':' and '-'"

GROUP_ID = NameRule("group id", 255)
QUERY_ID = NameRule("query id", 200, _SPARK_ID, _SPARK_ID_IN_WORDS)
RUN_ID = NameRule("run id", 200, _SPARK_ID, _SPARK_ID_IN_WORDS)
TOPIC = NameRule(
    "topic name",
    249,
    r"[a-zA-Z0-9._-]",
    "ASCII letters, digits, '.', '_' and '-'",
    reserved=frozenset({".", ".."}),
)
FOLDER_PATH = NameRule("path", 2048)
GRANT_PATTERN = NameRule("pattern", 255)
TOKEN_NAME = NameRule("token name", 255)
# Also in environment variables' names and metric labels: lowercase, no escaping.
CLUSTER = NameRule("cluster name", 40, r"[a-z0-9-]", "lowercase ASCII letters, digits and '-'")
