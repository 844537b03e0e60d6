"""Files made from other files of the repository (the chart's README, the API reference):
written by their script, checked to be current by the tests and ``--check``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(target: Path, make: Callable[[], str], description: str) -> int:
    """The command line of a generating script: writes ``target``, or with ``--check``
    exits 1 when it is not what ``make`` makes now."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {target.name} is stale")
    args = parser.parse_args()
    wanted = make()
    if args.check:
        if not target.exists() or target.read_text() != wanted:
            print(f"{target} is not current: run python {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    target.write_text(wanted)
    return 0
