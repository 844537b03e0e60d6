"""Files made from other files of the repository (the chart's README, the API reference):
written by their script, checked to be current by the tests and ``--check``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(target: Path, make: Callable[[], str], description: str) -> int:
    """The command line of a script that makes ``target`` whole: writes it, or with
    ``--check`` exits 1 when it is not what ``make`` makes now."""
    return write_or_check_pages({target: lambda _current: make()}, description)


def splice(text: str, name: str, block: str, source: str) -> str:
    """``text`` with what stands between the markers of block ``name`` replaced by
    ``block``. The markers say which script writes it; a page without them is refused."""
    begin = f"<!-- generated: {name}, by {source}; do not edit by hand -->\n"
    end = f"<!-- end of generated: {name} -->"
    if begin not in text or end not in text:
        raise SystemExit(f"no generated block {name!r} (markers {begin.strip()} ... {end})")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + block.rstrip("\n") + "\n" + end + tail


def write_or_check_pages(pages: dict[Path, Callable[[str], str]], description: str) -> int:
    """The command line of a generating script: writes each page, or with ``--check``
    exits 1 when one is not current. Each page's function takes the page as it is (""
    when there is none yet) and returns it as it should be: whole, or with its generated
    blocks made anew."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = parser.parse_args()
    stale = []
    for target, make in pages.items():
        current = target.read_text() if target.exists() else ""
        wanted = make(current)
        if wanted == current:
            continue
        if args.check:
            stale.append(str(target))
        else:
            target.write_text(wanted)
    if stale:
        print(f"not current: {', '.join(stale)}: run python {sys.argv[0]}", file=sys.stderr)
        return 1
    return 0
