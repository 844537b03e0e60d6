"""What the fuzz tests draw from: hostile text, names that may be hostile, and the budget.

Seeded and bounded in ``make test``; ``make fuzz`` sets ``FUZZ_EXAMPLES`` (and may
set ``FUZZ_SEED``) for a longer run."""

from __future__ import annotations

import ast
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import strategies as st

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "120"))
FUZZ_SEED = int(os.environ.get("FUZZ_SEED", "30"))


def examples(budget: int) -> int:
    """A property test's ``budget`` of examples in ``make test``, scaled as ``FUZZ_EXAMPLES``
    is (a quarter on the other Pythons' suites, more under ``make fuzz``)."""
    return max(10, budget * FUZZ_EXAMPLES // 120)


# Values no store can hold or no rule allows: a lone surrogate (valid JSON text, not
# Unicode text), NUL and other control characters, over-long names; and any code point.
UNSTORABLE = ["evil-\ud800", "\udfff", "\x00", "a\x00b", "line\nbreak", "e" * 5000, "é" * 300]
HOSTILE_TEXT = st.one_of(
    st.sampled_from(UNSTORABLE),
    st.text(st.characters(codec=None, categories=None, exclude_categories=()), max_size=300),
)
# A name of any kind, valid or hostile.
NAMES = st.one_of(st.from_regex(r"[a-z][a-z0-9._-]{0,20}", fullmatch=True), HOSTILE_TEXT)
PARTITIONS = st.one_of(st.from_regex(r"[0-9]{1,3}", fullmatch=True), NAMES)
OFFSETS = st.one_of(st.integers(0, 2**63 - 1), st.integers(), st.floats(), st.booleans())
KAFKA_OFFSETS = st.dictionaries(
    NAMES, st.dictionaries(PARTITIONS, OFFSETS, min_size=1, max_size=3), min_size=1, max_size=3
)
# Any JSON value, its strings hostile.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | NAMES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=20,
)


@contextmanager
def ast_parse_mismatch_retried() -> Iterator[None]:
    """``ast.parse`` with the garbage collector held off, tried once more on Python's "AST
    constructor recursion depth mismatch" SystemError (CPython gh-106905; 3.11.7 keeps the
    AST builder's depth per interpreter, so a collection inside it that runs finalizers
    lets another thread's parse change it). Seen twice in CI, raised inside Hypothesis
    while it described a strategy's lambda deep in its stack, with a retry alone failing
    alike. Parsing is pure: the product is not involved."""
    parse = ast.parse

    def quiet_parse(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return parse(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    def retried(*args: Any, **kwargs: Any) -> Any:
        try:
            return quiet_parse(*args, **kwargs)
        except SystemError as error:
            if "recursion depth mismatch" not in str(error):
                raise
            return quiet_parse(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ast, "parse", retried)
        yield
