"""What the fuzz tests draw from: hostile text, names that may be hostile, and the budget.

Seeded and bounded in ``make test``; ``make fuzz`` sets ``FUZZ_EXAMPLES`` (and may
set ``FUZZ_SEED``) for a longer run."""

from __future__ import annotations

import os

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
