"""The product's version, from one place: ``releases.toml`` (newest release first; the
first entry is the version this tree builds, undated until it is released).

    python scripts/release.py version        the tree's version
    python scripts/release.py stamp [--check] write it into every file that carries it
                                             (exit 1 with --check if one does not)
    python scripts/release.py build [--release]
                                             what ``make dist`` would build, as JSON: a
                                             release, a development build, or a refusal

A build is a release only from a clean tree whose HEAD is tagged ``v<version>``, the
version's entry dated. Anything else is a development build: every artifact's version
is ``<version>.dev<N>`` (N: commits since the previous release; PEP 440's form, which
Python's tools keep as it is), the chart's ``<chart>-dev<N>`` (SemVer, which Helm
requires), so that it can never be taken for the release. A tag of another version, or
a dated (released) first entry built from anywhere but its tag, is refused, saying what
to do; ``--release`` refuses a development build too. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from generated import splice

ROOT = Path(__file__).resolve().parent.parent
RELEASES = "releases.toml"


@dataclass(frozen=True)
class Place:
    """A file that carries the version (or, ``field="chart"``, the chart's), and where:
    each match's group 1 is it."""

    path: str
    pattern: str
    field: str = "version"

    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.MULTILINE)


PLACES = (
    Place("service/spark_offset_sidecar/__init__.py", r'^__version__ = "([^"]*)"$'),
    Place("jobs/spark_offset_listener/__init__.py", r'^__version__ = "([^"]*)"$'),
    Place(
        "jobs/jvm-listener/pom.xml",
        r"<artifactId>spark-offset-sidecar-listener</artifactId>\s*<version>([^<]*)</version>",
    ),
    Place("helm/spark-offset-sidecar/Chart.yaml", r"^version: (\S+)$", "chart"),
    Place("helm/spark-offset-sidecar/Chart.yaml", r'^appVersion: "([^"]*)"$'),
    Place("Dockerfile", r"^ARG VERSION=(\S+)$"),
)
# The manual's install procedures set VERSION=... (and CHART_VERSION=...) for the reader.
DOCS_VERSIONS = {
    "version": re.compile(r"^(VERSION=)(\S+)", re.MULTILINE),
    "chart": re.compile(r"^(CHART_VERSION=)(\S+)", re.MULTILINE),
}
VERSIONS_PAGE = "docs/versions.md"


class Refused(Exception):
    """A build that must not be made, with what to do instead."""


def releases(root: Path = ROOT) -> list[dict[str, str]]:
    found: list[dict[str, str]] = tomllib.loads((root / RELEASES).read_text())["release"]
    return found


def tree_version(root: Path = ROOT) -> str:
    return releases(root)[0]["version"]


def tree_versions(root: Path = ROOT) -> dict[str, str]:
    """The first entry's ``version`` and ``chart``."""
    first = releases(root)[0]
    return {"version": first["version"], "chart": first["chart"]}


def _replace(text: str, place: Place, version: str) -> str:
    def put(match: re.Match[str]) -> str:
        start, end = match.span(1)
        whole = match.group(0)
        return whole[: start - match.start()] + version + whole[end - match.start() :]

    return place.regex().sub(put, text)


def _docs(root: Path) -> list[Path]:
    """The pages whose procedures set VERSION=... (the chart's README is made from its
    template: both are written alike)."""
    chart = root / "helm" / "spark-offset-sidecar"
    pages = [root / "README.md", chart / "README.template.md", chart / "README.md"]
    return sorted((root / "docs").rglob("*.md")) + [p for p in pages if p.exists()]


def releases_table(root: Path = ROOT) -> str:
    """docs/versions.md's table of releases, made from releases.toml."""
    rows = ["| version | released | commit | chart |", "|---|---|---|---|"]
    for entry in releases(root):
        commit = f"`{entry['commit'][:7]}`" if entry.get("commit") else "-"
        date = entry.get("date", "not yet")
        rows.append(f"| {entry['version']} | {date} | {commit} | {entry['chart']} |")
    return "\n".join(rows) + "\n"


def stamped(root: Path, versions: dict[str, str]) -> dict[Path, str]:
    """Every file that carries a version, as it should read (``{path: text}``), for
    ``versions``: ``{"version": ..., "chart": ...}``."""
    texts: dict[Path, str] = {}
    for place in PLACES:
        path = root / place.path
        text = texts.get(path, path.read_text())
        if not place.regex().search(text):
            raise Refused(f"{place.path}: no version where {place.pattern!r} should find one")
        texts[path] = _replace(text, place, versions[place.field])
    for page in _docs(root):
        text = texts.get(page, page.read_text())
        for field, pattern in DOCS_VERSIONS.items():
            text = pattern.sub(lambda m, v=versions[field]: m.group(1) + v, text)  # type: ignore[misc]
        texts[page] = text
    versions_page = root / VERSIONS_PAGE
    if versions_page.exists():
        texts[versions_page] = splice(
            texts[versions_page], "releases", releases_table(root), "scripts/release.py"
        )
    return texts


def stamp(root: Path, versions: dict[str, str], *, check: bool = False) -> list[Path]:
    """Write ``versions`` into every file that carries one; the files that differed."""
    stale = []
    for path, text in stamped(root, versions).items():
        if path.read_text() != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    return stale


def found_versions(root: Path = ROOT) -> list[tuple[Place, set[str]]]:
    """The versions each place holds now (a test holds them to the tree's)."""
    return [
        (place, set(place.regex().findall((root / place.path).read_text()))) for place in PLACES
    ]


def _git(root: Path, *args: str) -> str | None:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@dataclass(frozen=True)
class Build:
    version: str  # what every artifact says
    chart: str  # the chart's version
    release: bool  # False: a development build
    tree_version: str  # releases.toml's first entry
    commit: str | None
    dirty: bool
    why: str  # why it is a development build, or "tagged v<version>"


def build(root: Path = ROOT, *, release_only: bool = False) -> Build:
    """What ``make dist`` builds from ``root`` now (``Refused`` says why it must not)."""
    entries = releases(root)
    entry, version = entries[0], entries[0]["version"]
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=normal")
    dirty = bool(status)
    tags = set((_git(root, "tag", "--points-at", "HEAD") or "").split())
    wanted = f"v{version}"
    others = sorted(t for t in tags if re.fullmatch(r"v\d+\.\d+\.\d+\S*", t) and t != wanted)
    if others and wanted not in tags:
        raise Refused(
            f"HEAD is tagged {others[0]}, but releases.toml's first version is {version}: "
            f"make {others[0][1:]} the first entry of releases.toml (with its date), or "
            "build from another commit"
        )
    if wanted in tags and not dirty:
        if not entry.get("date"):
            raise Refused(
                f"HEAD is tagged {wanted}, but releases.toml gives {version} no date: "
                "record the release (its date) in the tagged commit"
            )
        return Build(version, entry["chart"], True, version, commit, False, f"tagged {wanted}")
    if entry.get("date"):
        raise Refused(
            f"releases.toml's first version, {version}, is released ({entry['date']}), "
            f"and this is not its tag {wanted} on a clean tree: open the next version (a "
            "new first entry without a date) before building anything else"
        )
    why = "uncommitted changes" if dirty else f"HEAD is not tagged {wanted}"
    if commit is None:
        why = "not a git checkout"
    if release_only:
        raise Refused(
            f"not a release ({why}): a release is built from a clean tree tagged {wanted}"
        )
    previous = next((e["commit"] for e in entries[1:] if e.get("commit")), None)
    count = _git(root, "rev-list", "--count", f"{previous}..HEAD") if previous else None
    dev = count or "0"
    return Build(
        f"{version}.dev{dev}", f"{entry['chart']}-dev{dev}", False, version, commit, dirty, why
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="the version this tree builds")
    stamp_parser = commands.add_parser("stamp", help="write it into every file carrying it")
    stamp_parser.add_argument("--check", action="store_true", help="exit 1 if one does not")
    build_parser = commands.add_parser("build", help="what make dist builds, as JSON")
    build_parser.add_argument("--release", action="store_true", help="refuse a dev build")
    args = parser.parse_args()
    try:
        if args.command == "version":
            print(tree_version())
        elif args.command == "stamp":
            stale = stamp(ROOT, tree_versions(), check=args.check)
            if stale and args.check:
                names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
                print(f"not at releases.toml's version: {names}: run python {sys.argv[0]} "
                      "stamp", file=sys.stderr)  # fmt: skip
                return 1
        else:
            print(json.dumps(asdict(build(release_only=args.release))))
    except Refused as refused:
        print(f"release.py: refused: {refused}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
