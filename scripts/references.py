"""The manual's references made from the code, so that they cannot drift from it: the
metrics (``spark_offset_sidecar.observe.reference``, what the service registers), the
settings (``Settings.describe()``, what the service reads) and the alerts (the chart's
PrometheusRule template, with the defaults of ``values.yaml``).

    python scripts/references.py           # writes the generated blocks of the pages
    python scripts/references.py --check   # exits 1 when one is not current

Each page keeps its prose; only the block between its ``<!-- generated: NAME ... -->``
markers is made here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generated import splice, write_or_check_pages

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CHART = ROOT / "helm" / "spark-offset-sidecar"
SOURCE = "scripts/references.py"


def _cell(text: str) -> str:
    """Text in a table's cell: a pipe escaped, ``<`` not taken for an HTML tag."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ").strip()


def _code(names: Any) -> str:
    return ", ".join(f"`{n}`" for n in names) if names else ""


def metrics_table() -> str:
    from spark_offset_sidecar.observe.reference import series

    rows = [
        "| series | type | labels | what | absent |",
        "|---|---|---|---|---|",
    ]
    for s in series():
        labels = _code(s.labels)
        if s.by_level:
            labels += "¹"
        name = f"`{s.name}`" + ("²" if s.kafka_exporter else "")
        absent = s.absent or "never"
        rows.append(f"| {name} | {s.kind} | {labels} | {_cell(s.help)} | {_cell(absent)} |")
    rows += [
        "",
        "¹ with `SIDECAR_METRICS_GRANULARITY=partition` also `partition`; with `group` no "
        "`topic`.  ",
        "² only with `SIDECAR_EXPORT_KAFKA_LAG=true` (kafka_exporter's own names and help).",
    ]
    return "\n".join(rows) + "\n"


def failure_reasons() -> str:
    from spark_offset_sidecar.errors import COMMIT_FAILURE_REASONS

    return ", ".join(f"`{r}`" for r in sorted(COMMIT_FAILURE_REASONS)) + "\n"


def settings_table() -> str:
    """A table per section of the settings, titled as the section and named as the code
    names it (``Settings.http``)."""
    from spark_offset_sidecar.settings import Settings

    parts = []
    for name, section in Settings.sections().items():
        rows = [f"### {section.title}: `{name}`", "", "| variable | default | meaning |"]
        rows.append("|---|---|---|")
        for variable, default, meaning in section.describe():
            shown = f"`{default}`" if default else "none"
            rows.append(f"| `{variable}` | {shown} | {_cell(meaning)} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def _rule_defaults() -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rule: dict[str, Any] = values["metrics"]["prometheusRule"]
    return rule


def alerts() -> list[dict[str, str]]:
    """The chart's alerts as written in its template, each ``{{ .value }}`` given the
    default of ``values.yaml``."""
    defaults = _rule_defaults()
    template = (CHART / "templates" / "prometheusrule.yaml").read_text()

    def fill(text: str) -> str:
        return re.sub(r"\{\{ \.(\w+) \}\}", lambda m: str(defaults[m[1]]), text)

    found = []
    for chunk in re.split(r"^        - alert: ", template, flags=re.M)[1:]:
        name = chunk.split("\n", 1)[0].strip()
        expr = re.search(r"^          expr: (?:\|\n)?(.*?)^          (?:for|labels):", chunk,
                         re.M | re.S)  # fmt: skip
        assert expr is not None, name
        lines = [line.strip() for line in expr[1].splitlines()]
        waits = re.search(r"^          for: (.+)$", chunk, re.M)
        severity = re.search(r"severity: (\w+)", chunk)
        assert severity is not None, name
        found.append(
            {
                "alert": name,
                "expr": fill(" ".join(line for line in lines if not line.startswith("#"))),
                "for": fill(waits[1]) if waits else "at once",
                "severity": severity[1],
            }
        )
    return found


def alerts_table() -> str:
    rows = ["| alert | severity | fires when (default values) | for | runbook |",
            "|---|---|---|---|---|"]  # fmt: skip
    for a in alerts():
        rows.append(
            # A pipe inside a code span stays in its cell (Python-Markdown's tables).
            f"| `{a['alert']}` | {a['severity']} | `{a['expr']}` | {a['for']} | "
            f"[runbook](runbooks/{a['alert']}.md) |"
        )
    return "\n".join(rows) + "\n"


PAGES = {
    DOCS / "operate" / "metrics.md": lambda t: splice(
        splice(t, "metrics", metrics_table(), SOURCE), "reasons", failure_reasons(), SOURCE
    ),
    DOCS / "run" / "service.md": lambda t: splice(t, "settings", settings_table(), SOURCE),
    DOCS / "operate" / "alerts.md": lambda t: splice(t, "alerts", alerts_table(), SOURCE),
}


def main() -> int:
    return write_or_check_pages(PAGES, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
