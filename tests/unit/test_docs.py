"""The manual stays true to the code: its generated pages are current, every setting is in
its table, every shell command it shows names the test that runs it (or why none can
here), and `make bench` lists every scenario there is."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness.machine import ROOT
from spark_offset_sidecar.settings import Settings
from tests.support.manual import shell_blocks

DOCS = ROOT / "docs"
CHART_TEMPLATE = ROOT / "helm" / "spark-offset-sidecar" / "README.template.md"
# with the Python listener's README: its long description on PyPI
PAGES = [
    *sorted(DOCS.rglob("*.md")),
    ROOT / "README.md",
    CHART_TEMPLATE,
    ROOT / "jobs" / "README.md",
]
MARK = re.compile(r"^<!-- (run by (?P<test>\S+)( .+)?|not run here: .+) -->$")


def script(name: str) -> ModuleType:
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    sys.path.insert(0, str(path.parent))
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_the_charts_readme_is_made_from_its_values() -> None:
    chart_readme = script("chart_readme")
    assert (chart_readme.CHART / "README.md").read_text() == chart_readme.render(), (
        "helm/spark-offset-sidecar/README.md is stale: python scripts/chart_readme.py"
    )


def test_every_chart_value_has_a_description() -> None:
    import yaml

    chart_readme = script("chart_readme")
    text = (chart_readme.CHART / "values.yaml").read_text()
    tree = yaml.safe_load(text)

    def value(path: tuple[str, ...]) -> object:
        node: object = tree
        for part in path:
            assert isinstance(node, dict)
            node = node[part]
        return node

    blank = [
        ".".join(path)
        for path, words in chart_readme.described_keys(text).items()
        if not words and not (isinstance(value(path), dict) and value(path))  # a section
    ]
    assert not blank, f"values without a comment in values.yaml: {blank}"


def test_the_api_reference_is_made_from_the_openapi_schema() -> None:
    api_reference = script("api_reference")
    assert api_reference.TARGET.read_text() == api_reference.render(), (
        "docs/api/reference.md is stale: python scripts/api_reference.py"
    )


def test_the_metrics_settings_and_alerts_references_are_made_from_the_code() -> None:
    references = script("references")
    for page, make in references.PAGES.items():
        assert make(page.read_text()) == page.read_text(), (
            f"{page.relative_to(ROOT)} is stale: python scripts/references.py"
        )


def test_the_metrics_page_names_every_series_of_the_reference() -> None:
    """The page shows the reference whole (tests/e2e/test_helm_chart.py checks that a
    scrape exports nothing the reference lacks)."""
    from spark_offset_sidecar.observe.reference import series

    documented = {s.name for s in series()}
    page = (DOCS / "operate" / "metrics.md").read_text()
    for name in documented:
        assert f"`{name}`" in page, name
    histograms = {s.name for s in series() if s.kind == "histogram"}
    assert {"sidecar_commit_duration_seconds", "sidecar_store_write_duration_seconds"} <= histograms


def test_every_setting_is_in_the_manuals_table_and_nothing_else() -> None:
    table = (DOCS / "run" / "service.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| `SIDECAR_")]
    shown: set[str] = set()
    for row in rows:
        first = row.split("|")[1]
        names = re.findall(r"`(SIDECAR_[A-Z0-9_]+|_[A-Z0-9_]+)`", first)
        base = names[0]
        shown.add(base)
        stem = base.rsplit("_", 1)[0]
        for suffix in names[1:]:  # `SIDECAR_X_USERNAME` / `_PASSWORD_FILE`: shares a stem
            while stem and not _known(stem + suffix):
                stem = stem.rsplit("_", 1)[0] if "_" in stem else ""
            shown.add(stem + suffix)
    known = Settings.variables()
    assert sorted(known - shown) == [], "settings missing from docs/run/service.md"
    assert sorted(shown - known) == [], "docs/run/service.md names settings that do not exist"


def _known(variable: str) -> bool:
    return variable in Settings.variables()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_command_names_the_test_that_runs_it(page: Path) -> None:
    for block in shell_blocks(page):
        where = f"{page.name}:{block.line}"
        mark = MARK.match(block.above)
        assert mark, f"{where}: a shell block without <!-- run by ... -->"
        if mark["test"]:
            path, _, name = mark["test"].partition("::")
            source = ROOT / path
            assert source.is_file(), f"{where}: no {path}"
            assert re.search(rf"^(async )?def {name}\(", source.read_text(), re.M), (
                f"{where}: {path} has no test {name}"
            )


BENCH_HELPERS = {
    *("__init__", "__main__", "bench_support", "figures", "bare_endpoint", "batch_commits"),
}


def test_make_bench_lists_every_scenario() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    scenarios = {p.stem for p in (ROOT / "bench").glob("*.py")} - BENCH_HELPERS
    for name in scenarios:
        assert re.search(rf"^  {name} ", listed, re.M), f"python -m bench does not list {name}"
    results = (DOCS / "benchmarks" / "index.md").read_text()
    quoted = set(re.findall(r"\| `([a-z_]+) ", results))
    assert quoted <= scenarios, (
        f"the results page names scenarios that do not exist: {quoted - scenarios}"
    )


DECISIONS = DOCS / "decisions.md"
# Code cites a decision by its heading: the page's name, a comma, the heading in double
# quotes (a comment may wrap after the comma, never inside the heading).
CITATION = re.compile(r'docs/decisions\.md,\s*(?:#\s*)?"([^"\n]+)"')
CODE = [
    *(p for part in ("service", "tests", "scripts", "harness", "jobs", "migrations")
      for p in sorted((ROOT / part).rglob("*.py"))),
    *sorted((ROOT / "bench").glob("*.py")),
    ROOT / "Makefile",
]  # fmt: skip


def test_the_code_cites_decisions_by_their_headings_and_never_the_archive() -> None:
    """The day-by-day record of the benchmarks' runs (bench/) is a frozen archive: a reason
    is cited from docs/decisions.md, by a heading the page has."""
    headings = set(re.findall(r"^## (.+)$", DECISIONS.read_text(), re.M))
    archive = "RECORD" + ".md"  # named here without citing it
    cited = set()
    for path in CODE:
        text, where = path.read_text(), path.relative_to(ROOT)
        assert archive not in text, f"{where} cites bench/{archive}: cite docs/decisions.md"
        for heading in CITATION.findall(text):
            assert heading in headings, f"{where}: docs/decisions.md has no heading {heading!r}"
            cited.add(heading)
    assert len(cited) >= 5, cited


def test_every_decision_says_why_and_how_to_measure_it_again() -> None:
    """Each record has its context, decision, today's figure and a command; every
    ``python -m bench`` command names a scenario there is."""
    text = DECISIONS.read_text()
    scenarios = {p.stem for p in (ROOT / "bench").glob("*.py")} - BENCH_HELPERS
    records = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(records) > 10
    for record in records:
        heading = record.splitlines()[0]
        if heading == "Tried and not kept":
            continue
        for part in ("**Context.**", "**Decision.**", "**Today", "**Measure.**"):
            assert part in record, f"decisions.md, {heading!r}: no {part}"
    named = set(re.findall(r"python -m\s+bench\s+([a-z_]+)", text))
    assert named, "no python -m bench command"
    assert named <= scenarios, (
        f"decisions.md names scenarios that do not exist: {named - scenarios}"
    )


def _cli_options() -> dict[str, set[str]]:
    """Each command of ``offset-sidecar`` and the options its parser takes."""
    import argparse

    from spark_offset_sidecar import cli

    top = cli.parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name: {o for action in sub._actions for o in action.option_strings}
        for name, sub in commands.choices.items()
    }


def _code(page: Path) -> list[str]:
    """What ``page`` shows as code: its shell blocks' commands and its code spans."""
    spans = re.findall(r"`([^`\n]+)`", page.read_text())
    return [c for block in shell_blocks(page) for c in block.commands] + spans


def test_every_offset_sidecar_command_a_page_shows_exists_with_its_options() -> None:
    """``offset-sidecar follow ... --interval 5`` in a page is a command that fails when
    followed to the letter: every command and option shown must be the CLI's."""
    options = _cli_options()
    shown = 0
    for page in PAGES:
        for code in _code(page):
            for found in re.finditer(r"(?<![\w/.-])offset-sidecar ([a-z][a-z-]*)([^#|]*)", code):
                command, rest = found[1], found[2]
                assert command in options, f"{page.name}: no command offset-sidecar {command}"
                flags = set(re.findall(r"(?<!\S)(--[a-z][a-z-]*)", rest)) - {"--help"}
                unknown = flags - options[command]
                assert not unknown, f"{page.name}: offset-sidecar {command} has no {unknown}"
                shown += 1
    assert shown > 10


def test_every_install_from_a_registry_names_the_version() -> None:
    """A page installs a release by version (what the registries publish, and the pages'
    test installs: tests/e2e/test_registries.py), never whatever is newest: every pip
    install of the service or the listener pins ``==$VERSION``, every chart taken from
    the registry ``--version $CHART_VERSION``."""
    pip = re.compile(r"pip install [\"']?(spark-offset-(?:sidecar|listener))(\[[\w,]+\])?(\S*)")
    chart = re.compile(r"oci://\$OCI_REGISTRY/charts/spark-offset-sidecar(\s+\\?\s*\S+\s+\S+)?")
    pinned = 0
    for page in PAGES:
        text = page.read_text()
        for match in pip.finditer(text):
            assert match[3].startswith("==$VERSION"), f"{page.name}: {match[0]}"
            pinned += 1
        for match in chart.finditer(text):
            if match[0].endswith("charts/spark-offset-sidecar") and "`" in text[match.end()]:
                continue  # a name in prose
            words = [w.rstrip("`).,") for w in (match[1] or "").replace("\\", " ").split()]
            assert words == ["--version", "$CHART_VERSION"], f"{page.name}: {match[0]}"
            pinned += 1
    assert pinned >= 8


def test_every_image_build_a_page_shows_keeps_the_default_extras() -> None:
    """``--build-arg EXTRAS=...`` replaces the Dockerfile's list: a page's list that drops
    one (msk-iam, oidc) builds an image that refuses the settings needing it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    default = set(re.search(r"^ARG EXTRAS=(\S+)$", dockerfile, re.M)[1].split(","))  # type: ignore[index]
    for page in PAGES:
        for shown in re.findall(r"EXTRAS=([a-z0-9,-]+)", page.read_text()):
            assert default <= set(shown.split(",")), f"{page.name}: EXTRAS={shown}"


def test_the_java_the_jvm_listener_needs_is_the_one_its_build_targets() -> None:
    """A Spark 3.5 driver on Java 11 meets UnsupportedClassVersionError: the pages that
    attach the jar say which Java it needs, and it is the one the POM compiles for."""
    pom = (ROOT / "jobs" / "jvm-listener" / "pom.xml").read_text()
    release = re.search(r"<maven.compiler.release>(\d+)</maven.compiler.release>", pom)
    assert release is not None
    page = (DOCS / "attach" / "jvm-listener.md").read_text()
    assert f"must run Java {release[1]} or newer" in page
    trouble = (DOCS / "operate" / "troubleshooting.md").read_text()
    assert "UnsupportedClassVersionError" in trouble
    assert f"built for Java {release[1]}" in trouble
