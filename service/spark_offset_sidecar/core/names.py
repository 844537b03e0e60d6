"""Names the service accepts: the one definition, used at every edge.

Every name that reaches the ledger, the store, an answer, a metric label or a log line
passes one of these rules first: HTTP bodies, paths and query strings (``http.models``,
the hot path ``http.progress_route``), progress events (``core.spark.progress``), Spark's
checkpoint files (``core.spark.checkpoint_log``), the tokens file's grants (``http.auth``).

Rules every name keeps (so that one caller's name can never fail another's write: a
batch of writes holds many callers' values, and one value the database cannot take
fails the batch):
  N1 it is a ``str`` of Unicode scalar values: no lone surrogate (U+D800-U+DFFF). JSON
     text may carry one (``"\\ud800"``), but it is not Unicode text: UTF-8 cannot encode
     it, so neither SQLite, PostgreSQL, nor a JSON answer could hold it.
  N2 it has no control character (U+0000-U+001F, U+007F): no NUL (PostgreSQL's text
     cannot hold one), no line break or escape sequence in a log line or a terminal.
  N3 it has 1 to the kind's maximum characters.
  N4 it has only the kind's own characters, and is none of its reserved names.

Kinds (N3, N4):
  group id      1-255, any character (Kafka allows any string)
  query/run id  1-200, ASCII letters, digits, '.', '_', ':', '-' (Spark's are UUIDs)
  topic         Kafka's own rule: 1-249, ASCII letters, digits, '.', '_', '-'; not '.'
                or '..' (a topic Kafka cannot have could never be committed)
  folder path   1-2048, any character
  grant pattern a token's group or topic pattern: 1-255, any character
  token name    1-255, any character (shown in logs, metrics and answers)
  cluster name  1-40, lowercase ASCII letters, digits and '-' (also in environment
                variables' names and metric labels)
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
CLUSTER = NameRule("cluster name", 40, r"[a-z0-9-]", "lowercase ASCII letters, digits and '-'")
