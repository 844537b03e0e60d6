"""What the manual says that the code decides, checked against the code: figures and
names a page quotes (the ledger's rules, a cluster name's rule, when a file setting is
read, a refusal of the chart), the links that find a page, and the values an example
shows. Each test reads the code's own definition, never a copy of the figure."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from harness.machine import ROOT
from spark_offset_sidecar.core.names import CLUSTER
from spark_offset_sidecar.settings import Settings
from tests.support.manual import shell_blocks

DOCS = ROOT / "docs"
CHART = ROOT / "helm" / "spark-offset-sidecar"
# Every page a user reads: the manual, the front doors, the chart's README and values.
PAGES = [
    *sorted(DOCS.rglob("*.md")),
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    CHART / "README.template.md",
    CHART / "values.yaml",
]


def _text(path: Path) -> str:
    return path.read_text()


def test_the_pages_number_the_ledgers_rules_as_the_code_does() -> None:
    rules = _text(ROOT / "service" / "spark_offset_sidecar" / "core" / "ledger" / "rules.py")
    table = rules.split('"""', 2)[1]
    newest = max(int(n) for n in re.findall(r"^  R(\d+) ", table, re.M))
    quoted = 0
    for page in PAGES:
        for last in re.findall(r"\bR1-R(\d+)\b", _text(page)):
            assert int(last) == newest, f"{page.name} says R1-R{last}; the code has R1-R{newest}"
            quoted += 1
    assert quoted, "no page names the rules' range"


def _links(page: Path) -> set[str]:
    return set(re.findall(r"\]\(([^)#\s]+)", _text(page)))


def test_every_page_on_running_the_service_is_linked_from_the_front_doors() -> None:
    run = sorted(p.name for p in (DOCS / "run").glob("*.md"))
    readme = {link.removeprefix("docs/run/") for link in _links(ROOT / "README.md")}
    front = {link.removeprefix("run/") for link in _links(DOCS / "index.md")}
    assert [p for p in run if p not in readme] == [], "pages the README does not link"
    assert [p for p in run if p not in front] == [], "pages docs/index.md does not link"


def test_the_clusters_page_states_the_names_rule_of_the_code() -> None:
    page = _text(DOCS / "run" / "clusters.md")
    assert f"1 to {CLUSTER.max_length} characters" in page
    assert CLUSTER.characters == r"[a-z0-9-]", "the page's words say this set"
    assert "lower-case ASCII letters, digits and `-`" in page


def _setting_files() -> set[str]:
    return {v for v in Settings.variables() if v.endswith("FILE")}


def test_the_service_page_says_when_each_file_setting_is_read() -> None:
    """Outside the generated tables, the page's list names each setting that names a file
    once, under "once, at start" or "at each use" (a new one must be placed)."""
    page = _text(DOCS / "run" / "service.md")
    prose = re.sub(r"<!-- generated: .*?<!-- end of generated: [a-z]+ -->", "", page, flags=re.S)
    start = prose.index("- once, at start:")
    listed = prose[start : prose.index("\n\n", prose.index("- at each use", start))]
    named = re.findall(r"`(SIDECAR_[A-Z_]+)`", listed)
    assert sorted(named) == sorted(_setting_files()), "each file setting, once"


def _subset(shown: Any, full: Any, where: str) -> None:
    if isinstance(shown, dict):
        assert isinstance(full, dict), where
        for key, value in shown.items():
            assert key in full, f"{where}.{key}"
            _subset(value, full[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(full, list), where
        assert len(shown) <= len(full), where
        for index, value in enumerate(shown):
            _subset(value, full[index], f"{where}[{index}]")
    elif isinstance(shown, str) and isinstance(full, str) and "," in full:
        assert shown == full or set(shown.split(",")) <= set(full.split(",")), where
    else:
        assert shown == full, where


def test_the_clusters_page_shows_values_of_its_complete_example() -> None:
    """The page's values are the ones the chart's tests render (ci/clusters-values.yaml)."""
    page = _text(DOCS / "run" / "clusters.md")
    blocks = re.findall(r"^```yaml\n(.*?)^```", page, re.M | re.S)
    assert blocks, "the page shows the chart's values"
    full = yaml.safe_load(_text(CHART / "ci" / "clusters-values.yaml"))
    for block in blocks:
        _subset(yaml.safe_load(block), full, "values")


def test_the_charts_readme_quotes_the_refusals_its_templates_make() -> None:
    helpers = _text(CHART / "templates" / "_helpers.tpl")
    failures = re.findall(r'fail "([^"]+)"', helpers)
    spans = re.findall(r"`([^`\n]+)`", _text(CHART / "README.template.md"))
    quoted = [span for span in spans if " needs " in span]
    assert quoted, "the README says what the chart refuses"
    for refusal in quoted:
        assert any(refusal in failure for failure in failures), refusal


def test_a_page_that_runs_burrow_names_the_packages_it_needs() -> None:
    script = _text(ROOT / "scripts" / "local-burrow.sh")
    # Debian's package: what the script checks it by.
    needed = {"burrow": "command -v Burrow", "zookeeper": "/usr/share/java/zookeeper.jar"}
    assert all(check in script for check in needed.values()), "the script needs others"
    pages = [
        page
        for page in PAGES
        if page.suffix == ".md"
        and any("local-burrow.sh start" in c for b in shell_blocks(page) for c in b.commands)
    ]
    assert pages
    for page in pages:
        for name in needed:
            assert f"`{name}`" in _text(page), f"{page.name} does not name {name}"


# The budget of a scrape in the text format (docs/operate/metrics.md) and the benchmarks'
# measurements (docs/benchmarks/index.md: scrape_cost's, scrape_size's): the only sizes a
# page may quote.
SCRAPE_SIZES = {"4.5 MB", "9 MB", "4.25 MB", "8.5 MB", "4.29 MB", "8.61 MB"}


def test_every_page_quoting_a_scrapes_size_quotes_the_budget_or_a_measurement() -> None:
    quoted = 0
    for page in PAGES:
        for line in _text(page).splitlines():
            if "scrape" not in line.lower():
                continue
            for size in re.findall(r"(\d[\d.,]* MB)\b", line):
                assert size in SCRAPE_SIZES, f"{page.name}: {line.strip()}"
                quoted += 1
    assert quoted


def test_the_sizing_page_counts_the_processes_serve_runs() -> None:
    from spark_offset_sidecar.topology import Topology

    def processes(topology: Topology) -> str:
        count = 1 + (topology.watcher == "child") + (topology.writer == "child")
        return {2: "two", 3: "three"}[count]

    alone = Topology.resolve(replicated=False, database="sqlite:///s.db")
    replica = Topology.resolve(replicated=True, database="postgresql://h/s")
    page = " ".join(_text(DOCS / "run" / "sizing.md").split())
    assert f"`offset-sidecar serve` runs {processes(alone)}:" in page
    assert f"A replica (PostgreSQL, as the chart runs it) runs {processes(replica)}," in page
