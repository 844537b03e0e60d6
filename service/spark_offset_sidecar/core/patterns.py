"""Name patterns of grants (groups, topics): shell-style, case-sensitive (``orders-*``)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """``matches_any`` with ``patterns`` compiled once into one expression: for asking
    about thousands of names."""
    listed = list(patterns)
    if "*" in listed:
        return lambda name: True
    if not listed:
        return lambda name: False
    compiled = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in listed))
    return lambda name: compiled.match(name) is not None
