"""A process's children and their state, read from /proc (Linux)."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, whichever of its threads started them (the
    kernel's ``task/<tid>/children`` lists one thread's only)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def command_line(pid: int) -> str | None:
    """``pid``'s arguments joined by spaces; None once it has exited."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().rstrip()
    except OSError:
        return None
