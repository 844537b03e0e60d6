"""The manual's shell blocks, read once for the tests that hold them to account: each
block's line, the comment above it (which test runs it, or why none can here) and its
commands."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent> *)```(sh|bash)\s*$")  # indented: in a numbered step


@dataclass(frozen=True)
class ShellBlock:
    line: int  # of the opening fence, from 1
    above: str  # the line right above the fence
    commands: list[str]  # continued over a trailing backslash or an open quote


def shell_blocks(page: Path) -> list[ShellBlock]:
    """Every ``sh``/``bash`` block of ``page`` (at the margin, or indented in a list's
    step); a line that is only a comment is left out of its commands."""
    lines = page.read_text().splitlines()
    blocks: list[ShellBlock] = []
    start: int | None = None
    commands: list[str] = []
    pending = ""
    indent = 0
    for number, whole in enumerate(lines):
        if start is None:
            if fence := FENCE.match(whole):
                start, commands, pending = number, [], ""
                indent = len(fence["indent"])
            continue
        line = whole[indent:] if whole[:indent].isspace() else whole
        if line.startswith("```"):
            above = lines[start - 1].strip() if start else ""
            blocks.append(ShellBlock(start + 1, above, commands))
            start = None
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1]
        elif _complete(pending):
            commands.append(pending)
            pending = ""
    return blocks


def _complete(command: str) -> bool:
    try:
        shlex.split(command, comments=True)
    except ValueError:  # a quote still open: the command goes on
        return False
    return True
