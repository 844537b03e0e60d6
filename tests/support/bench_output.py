"""What a benchmark scenario prints, read back: ``bench.figures.Table``'s markdown tables,
and the check that each row carries the CPU of its sides (shared by the scenarios' smoke
runs and the soak test, which runs its scenario through the same runner)."""

from __future__ import annotations

import re


def tables(output: str) -> list[tuple[list[str], list[list[str]]]]:
    """The markdown tables ``bench.figures.Table`` printed: (header, rows) each."""
    found: list[tuple[list[str], list[list[str]]]] = []
    lines = output.splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.startswith("| ") and lines[index + 1].startswith("| --- |"):
            rows = []
            for row in lines[index + 2 :]:
                if not row.startswith("| "):
                    break
                rows.append([c.strip() for c in row.strip("|").split(" | ")])
            found.append(([c.strip() for c in line.strip("|").split(" | ")], rows))
    return found


def check_cpu_columns(name: str, output: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of ``output`` has rows, ends in the machine's steal, and every row has
    a numeric CPU cell for each side and some side that used CPU; the tables."""
    found = tables(output)
    assert found, f"{name} printed no table:\n{output[-3000:]}"
    for header, rows in found:
        assert rows, f"{name}: a table without rows: {header}"
        assert header[-1] == "steal %", header
        sides = [i for i, column in enumerate(header) if column.endswith(" CPU s")]
        assert sides, f"{name}: no CPU column in {header}"
        for row in rows:
            assert len(row) == len(header), (header, row)
            for i in sides:
                assert re.fullmatch(r"-|[\d,]+(\.\d+)?", row[i]), (header[i], row[i])
            assert any(row[i] != "-" and float(row[i].replace(",", "")) > 0 for i in sides), (
                f"{name}: no side used any CPU in {row}"
            )
    return found
