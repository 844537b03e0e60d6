"""Processes as Linux's /proc tells them: their stat fields, children, state and command
line (for the tests and the benchmarks; standard library only)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def stat_fields(path: str) -> list[str]:
    """The fields of a /proc ``stat`` file after the command's name (state is field 0)."""
    return Path(path).read_text().rsplit(")", 1)[1].split()


def children_by_parent() -> dict[int, list[int]]:
    """Every live process's children, by parent pid, whichever of its threads started
    them (the kernel's ``task/<tid>/children`` lists one thread's only)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):  # exited meanwhile
            parent = int(stat_fields(f"/proc/{entry.name}/stat")[1])
            children.setdefault(parent, []).append(int(entry.name))
    return children


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    return children_by_parent().get(pid, [])


def children_running(pid: int, argument: str) -> list[int]:
    """The live children of ``pid`` that were started with ``argument`` among their
    arguments (``"watcher"``, ``"writer"``: the children of ``serve``)."""
    found = []
    for child in children(pid):
        line = command_line(child)
        if line is not None and argument in line.split(" ") and alive(child):
            found.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return stat_fields(f"/proc/{pid}/stat")[0] != "Z"
    except OSError:
        return False


def command_line(pid: int) -> str | None:
    """``pid``'s arguments joined by spaces; None once it has exited."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().rstrip()
    except OSError:
        return None
