"""The chart's README (what ``helm show readme`` and Artifact Hub display), with its values
table generated from ``values.yaml`` (defaults and comments) and ``values.schema.json``
(types and allowed values), so that the table cannot drift from the chart.

    python scripts/chart_readme.py           # writes helm/spark-offset-sidecar/README.md
    python scripts/chart_readme.py --check   # exits 1 when the README is not current

The prose is ``README.template.md`` beside the chart; ``{{ values }}`` there becomes the
table. A value's description is the comment block right above its key (at the key's own
indentation) and the comment on its line; a key without either still gets its row.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generated import write_or_check

CHART = Path(__file__).resolve().parent.parent / "helm" / "spark-offset-sidecar"
MARKER = "{{ values }}"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")
COMMENT = re.compile(r"^(?P<indent> *)#(?P<text>.*)$")


def _inline_comment(rest: str) -> str:
    """The comment after a value on its line (a ``#`` outside quotes, after a space)."""
    quote = ""
    for i, char in enumerate(rest):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or rest[i - 1] == " "):
            return rest[i + 1 :].strip()
    return ""


def described_keys(text: str) -> dict[tuple[str, ...], str]:
    """Every key's path in ``values.yaml`` with its description (maybe empty)."""
    found: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    block: list[tuple[int, str]] = []  # the comment lines right above the current line
    for line in text.splitlines():
        if not line.strip():
            block = []
            continue
        comment = COMMENT.match(line)
        if comment:
            block.append((len(comment["indent"]), comment["text"].strip()))
            continue
        key = KEY.match(line)
        if key is None:  # a list item or a continued value
            block = []
            continue
        indent = len(key["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key["key"]))
        above = [t for i, t in block if i == indent] if all(i == indent for i, _ in block) else []
        words = " ".join([*above, _inline_comment(key["rest"])]).strip()
        found[tuple(k for _, k in stack)] = words
        block = []
    return found


def _schema_at(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = schema
    for part in path:
        node = node.get("properties", {}).get(part, {})
    return node


def _type_of(node: dict[str, Any]) -> str:
    kind = node.get("type", "")
    kinds = " or ".join(kind) if isinstance(kind, list) else kind
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    if kinds == "array" and "type" in node.get("items", {}):
        return f"array of {node['items']['type']}"
    return kinds or "any"


def _value_at(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = values
    for part in path:
        node = node[part]
    return node


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def values_table(values_text: str, schema: dict[str, Any]) -> str:
    values = yaml.safe_load(values_text)
    rows = ["| Value | Type | Default | Description |", "|---|---|---|---|"]
    for path, words in described_keys(values_text).items():
        value = _value_at(values, path)
        if isinstance(value, dict) and value and not words:
            continue  # a section without words of its own: its keys have the rows
        default = "see below" if isinstance(value, dict) and value else json.dumps(value)
        kind = _type_of(_schema_at(schema, path))
        rows.append(f"| `{'.'.join(path)}` | {_cell(kind)} | `{_cell(default)}` | {_cell(words)} |")
    return "\n".join(rows)


def render(chart: Path = CHART) -> str:
    template = (chart / "README.template.md").read_text()
    if MARKER not in template:
        raise SystemExit(f"{chart / 'README.template.md'}: no {MARKER} in it")
    schema = json.loads((chart / "values.schema.json").read_text())
    table = values_table((chart / "values.yaml").read_text(), schema)
    return template.replace(MARKER, table)


def main() -> int:
    return write_or_check(CHART / "README.md", render, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
