"""The product's version, from one place: ``releases.toml`` (newest release first; the
first entry is the version this tree builds, undated until it is released).

    python scripts/release.py version        the tree's version
    python scripts/release.py stamp [--check] write the versions into every file that
                                             carries one, and the project's addresses (its
                                             [project]) (exit 1 with --check if one does not)
    python scripts/release.py build [--release]
                                             what ``make dist`` would build, as JSON: a
                                             release, a development build, or a refusal
    python scripts/release.py record FOLDER NEXT NEXT_CHART
                                             after the cut: record the release FOLDER holds
                                             (its commit and checksums) and open NEXT
    python scripts/release.py verify FOLDER  a rebuild against the recorded checksums (exit 1
                                             if a file made of the commit alone differs)

The artifacts carry the tree's version; the manual's procedures (``VERSION=``,
``CHART_VERSION=``) carry the newest released one, the version a reader can install.

A build is a release when releases.toml's first entry is dated and the tree is clean: the
commit that dates it is the release's commit, recorded in the entry by the commit after it
(a tag is optional: tags do not travel with every clone). Once recorded, only that commit
builds it. Anything else is a development build: every artifact's version is
``<version>.dev<N>`` (N: commits since the previous release; PEP 440's form, which Python's
tools keep as it is), the chart's ``<chart>-dev<N>`` (SemVer, which Helm requires), so that
it can never be taken for the release. ``--release`` refuses a development build.
Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
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
    """A file that carries the version (or, ``field="chart"``, the chart's; ``"home"`` or
    ``"manual"``, the project's address), and where: each match's group 1 is it."""

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
    # the image Artifact Hub lists: the chart's default, the release's
    Place("helm/spark-offset-sidecar/Chart.yaml", r"^      image: spark-offset-sidecar:(\S+)$"),
    # The project's addresses, as the registries show them.
    *(
        Place(path, pattern, field)
        for path in ("pyproject.toml", "jobs/pyproject.toml")
        for pattern, field in (
            (r'^(?:Homepage|Source) = "([^"]*)"$', "home"),
            (r'^Documentation = "([^"]*)"$', "manual"),
        )
    ),
    Place("jobs/README.md", r"\[spark-offset-sidecar\]\(([^)\s]*)\)", "home"),
    Place("jobs/README.md", r"\]\(([^)\s]*)attach/python-listener/\)", "manual"),
    *(
        Place("jobs/jvm-listener/pom.xml", pattern, "home")
        for pattern in (
            r"^  <url>([^<]*)</url>$",
            r"^    <url>([^<]*)</url>$",  # the scm's
            r"<organizationUrl>([^<]*)</organizationUrl>",
            r"<(?:connection|developerConnection)>scm:git:([^<]*)\.git</",
        )
    ),
    *(
        Place("helm/spark-offset-sidecar/Chart.yaml", pattern, field)
        for pattern, field in (
            (r"^home: (\S+)$", "home"),
            (r"^sources:\n  - (\S+)$", "home"),
            (r"^    url: (\S+)$", "home"),  # the maintainers'
            (r"- name: source\n      url: (\S+)$", "home"),
            (r"- name: documentation\n      url: (\S+)$", "manual"),
        )
    ),
)
ADDRESSES = ("home", "manual")  # releases.toml's [project]
# The manual's install procedures set VERSION=... (and CHART_VERSION=...) for the reader,
# and name the release's files and what they print: all of it the newest release's,
# whatever the tree builds.
DOCS_VERSIONS = {
    "version": re.compile(r"^(\s*VERSION=)(\S+)()", re.MULTILINE),
    "chart": re.compile(r"^(\s*CHART_VERSION=)(\S+)()", re.MULTILINE),
}
_RELEASED_NAMES = (
    "spark-offset-sidecar-listener-",
    "spark-offset-sidecar-listener:",  # Maven coordinates: --packages, spark.jars.packages
    "spark_offset_sidecar-",
    "spark_offset_listener-",
    "spark-offset-sidecar-image-",
    "spark-offset-sidecar:",
    "offset-sidecar ",
    "spark-offset-listener/",
    "spark-offset-sidecar-listener/",
    "Implementation-Version: ",
    "prints `",
)
RELEASED_NAMES = re.compile(
    "(" + "|".join(map(re.escape, _RELEASED_NAMES)) + r"|For (?=\S+ \(chart ))"
    r"(\d+\.\d+\.\d+)(?![\d.]*dev)()"
)
CHART_NAMES = re.compile(r"(spark-offset-sidecar-|\(chart )(\d+\.\d+\.\d+)(\.tgz|\))")
VERSIONS_PAGE = "docs/versions.md"


class Refused(Exception):
    """A build that must not be made, with what to do instead."""


def releases(root: Path = ROOT) -> list[dict[str, str]]:
    found: list[dict[str, str]] = tomllib.loads((root / RELEASES).read_text())["release"]
    return found


def tree_version(root: Path = ROOT) -> str:
    return releases(root)[0]["version"]


def addresses(root: Path = ROOT) -> dict[str, str]:
    """The project's addresses: releases.toml's ``[project]`` ``home`` and ``manual``."""
    project = tomllib.loads((root / RELEASES).read_text()).get("project", {})
    missing = [key for key in ADDRESSES if not project.get(key)]
    if missing:
        raise Refused(f"{RELEASES}: [project] has no {', '.join(missing)}")
    return {key: project[key] for key in ADDRESSES}


def tree_versions(root: Path = ROOT) -> dict[str, str]:
    """The first entry's ``version`` and ``chart``, and the project's addresses: what
    ``stamp`` writes."""
    first = releases(root)[0]
    return {"version": first["version"], "chart": first["chart"], **addresses(root)}


def released_versions(root: Path = ROOT) -> dict[str, str]:
    """The newest dated entry's ``version`` and ``chart``: what a reader can install."""
    newest = next(e for e in releases(root) if e.get("date"))
    return {"version": newest["version"], "chart": newest["chart"]}


def _replace(text: str, place: Place, version: str) -> str:
    def put(match: re.Match[str]) -> str:
        start, end = match.span(1)
        whole = match.group(0)
        return whole[: start - match.start()] + version + whole[end - match.start() :]

    return place.regex().sub(put, text)


def _docs(root: Path) -> list[Path]:
    """The pages whose procedures set VERSION=... (the chart's README is made from its
    template: both are written alike; the listener's is its long description)."""
    chart = root / "helm" / "spark-offset-sidecar"
    pages = [
        root / "README.md",
        root / "jobs" / "README.md",
        chart / "README.template.md",
        chart / "README.md",
    ]
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
    """Every file that carries a version, as it should read (``{path: text}``): the
    artifacts' files at ``versions`` (``{"version": ..., "chart": ...}``; the addresses:
    ``root``'s, unless given), the manual's procedures at the newest release's."""
    versions = {**addresses(root), **versions}
    texts: dict[Path, str] = {}
    for place in PLACES:
        path = root / place.path
        text = texts.get(path, path.read_text())
        if not place.regex().search(text):
            raise Refused(f"{place.path}: no version where {place.pattern!r} should find one")
        texts[path] = _replace(text, place, versions[place.field])
    for page, text in pages_stamped(root, texts).items():
        texts[page] = text
    versions_page = root / VERSIONS_PAGE
    if versions_page.exists():
        texts[versions_page] = splice(
            texts[versions_page], "releases", releases_table(root), "scripts/release.py"
        )
    return texts


def pages_stamped(root: Path, texts: dict[Path, str] | None = None) -> dict[Path, str]:
    """The manual's pages with their procedures' ``VERSION=`` and ``CHART_VERSION=`` at
    the newest release's (``texts``: pages already changed, read from there)."""
    released, done = released_versions(root), dict(texts or {})
    for page in _docs(root):
        text = done.get(page, page.read_text())
        for field, pattern in [*DOCS_VERSIONS.items(), ("version", RELEASED_NAMES)]:
            text = pattern.sub(lambda m, v=released[field]: m.group(1) + v + m.group(3), text)  # type: ignore[misc]
        text = CHART_NAMES.sub(lambda m: m.group(1) + released["chart"] + m.group(3), text)
        done[page] = text
    return {page: done[page] for page in _docs(root)}


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
    why: str  # why it is a development build, or "dated" for a release


def build(root: Path = ROOT, *, release_only: bool = False) -> Build:
    """What ``make dist`` builds from ``root`` now (``Refused`` says why it must not)."""
    entries = releases(root)
    entry, version = entries[0], entries[0]["version"]
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=normal")
    dirty = bool(status)
    if entry.get("date"):
        if commit is None or dirty:
            raise Refused(
                f"releases.toml dates {version} ({entry['date']}): a release is built from "
                "a clean git checkout of its commit; commit or remove the changes "
                "(git status), or open the next version (a new first entry without a date)"
            )
        recorded = entry.get("commit")
        if recorded and recorded != commit:
            raise Refused(
                f"{version} was released from commit {recorded} (releases.toml), not "
                f"{commit}: check that commit out to rebuild it, or open the next version"
            )
        return Build(version, entry["chart"], True, version, commit, False, "dated")
    why = "uncommitted changes" if dirty else f"releases.toml gives {version} no date"
    if commit is None:
        why = "not a git checkout"
    if release_only:
        raise Refused(
            f"not a release ({why}): a release is built from the clean commit that gives "
            f"{version} its date in releases.toml"
        )
    previous = next((e["commit"] for e in entries[1:] if e.get("commit")), None)
    count = _git(root, "rev-list", "--count", f"{previous}..HEAD") if previous else None
    dev = count or "0"
    return Build(
        f"{version}.dev{dev}", f"{entry['chart']}-dev{dev}", False, version, commit, dirty, why
    )


def checksums(folder: Path) -> dict[str, str]:
    """``{name: sha256}`` of every file of a release folder but ``SHA256SUMS``."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != "SHA256SUMS"
    }


def record(root: Path, folder: Path, next_version: str, next_chart: str) -> None:
    """Write into releases.toml, for the release ``folder`` holds (built with
    ``--release``), its commit and checksums, and open ``next_version`` above it."""
    built = json.loads((folder / "build.json").read_text())
    first = releases(root)[0]
    if not built["release"] or built["version"] != first["version"] or first.get("commit"):
        raise Refused(
            f"{folder} holds {built['version']} (release: {built['release']}); releases.toml's "
            f"first entry is {first['version']}, recorded: {bool(first.get('commit'))}: record "
            "the folder `make dist RELEASE=1` built from the commit that dates the first entry"
        )
    text = (root / RELEASES).read_text()
    header = "[[release]]\n"
    head, rest = text.split(header, 1)
    entry, sep, later = rest.partition("\n" + header)
    sums = "".join(f'"{name}" = "{digest}"\n' for name, digest in checksums(folder).items())
    recorded = (
        f'{entry.rstrip()}\ncommit = "{built["commit"]}"\n\n'
        f"# what make dist RELEASE=1 built from that commit when it was cut\n"
        f"[release.sha256]\n{sums}"
    )
    opened = f'{header}version = "{next_version}"\nchart = "{next_chart}"\n\n'
    (root / RELEASES).write_text(head + opened + header + recorded + sep + later)


# The files a build resolves from registries as it runs: the image (Debian's packages, and
# the Python packages within the ranges the service declares) and the service's SBOM (the
# same resolution). Rebuilt later, they differ as soon as a registry serves a newer package;
# every other file is made of the commit alone and must come out byte for byte the same.
RESOLVED = re.compile(r"spark-offset-sidecar-image-.*|spark_offset_sidecar-[^-]+\.cdx\.json")


def compared(root: Path, folder: Path) -> dict[str, str]:
    """How a rebuilt release folder differs from the checksums recorded at its cut:
    ``{file: "differs" | "missing" | "not recorded"}`` (``{}``: byte for byte the same)."""
    version = json.loads((folder / "build.json").read_text())["version"]
    entry = next((e for e in releases(root) if e["version"] == version), None)
    if entry is None or "sha256" not in entry:
        return {RELEASES: f"records no checksums for {version}"}
    recorded: dict[str, str] = dict(entry["sha256"])  # type: ignore[arg-type]
    found = checksums(folder)
    return {
        name: "missing"
        if name not in found
        else "not recorded"
        if name not in recorded
        else "differs"
        for name in sorted(set(recorded) | set(found))
        if recorded.get(name) != found.get(name)
    }


def verify(root: Path, folder: Path) -> list[str]:
    """The differences (``compared``) of the files made of the commit alone: ``[]`` when
    the rebuild is the release."""
    return [f"{n}: {how}" for n, how in compared(root, folder).items() if not RESOLVED.fullmatch(n)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="the version this tree builds")
    stamp_parser = commands.add_parser("stamp", help="write it into every file carrying it")
    stamp_parser.add_argument("--check", action="store_true", help="exit 1 if one does not")
    build_parser = commands.add_parser("build", help="what make dist builds, as JSON")
    build_parser.add_argument("--release", action="store_true", help="refuse a dev build")
    record_parser = commands.add_parser("record", help="record a cut release, open the next")
    record_parser.add_argument("folder", type=Path)
    record_parser.add_argument("next_version")
    record_parser.add_argument("next_chart")
    verify_parser = commands.add_parser("verify", help="a rebuild against its checksums")
    verify_parser.add_argument("folder", type=Path)
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
        elif args.command == "record":
            record(ROOT, args.folder, args.next_version, args.next_chart)
        elif args.command == "verify":
            for name, how in compared(ROOT, args.folder).items():
                moved = (
                    " (resolved from registries at build time)" if RESOLVED.fullmatch(name) else ""
                )
                print(f"{name}: {how}{moved}")
            wrong = verify(ROOT, args.folder)
            print(f"{args.folder}: " + ("not the release" if wrong else "the release"))
            return 1 if wrong else 0
        else:
            print(json.dumps(asdict(build(release_only=args.release))))
    except Refused as refused:
        print(f"release.py: refused: {refused}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
