"""Name patterns of grants (groups, topics): shell-style, case-sensitive (``orders-*``)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
