"""One version, from releases.toml: every file that carries it agrees, the changelog's
entries are its releases, ``offset-sidecar --version`` says it, and ``make dist``'s rule
tells a release from a development build (and refuses what is neither)."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.machine import ROOT
from spark_offset_sidecar import __version__, cli

release = importlib.import_module("release")  # scripts/release.py: harness puts it on the path


def test_every_file_that_carries_the_version_holds_releases_tomls() -> None:
    wanted = release.tree_versions()
    for place, found in release.found_versions():
        assert found == {wanted[place.field]}, f"{place.path}: {found}, not {wanted}"
    assert release.stamp(ROOT, wanted, check=True) == []


def test_the_check_fails_on_a_file_left_at_another_version(tmp_path: Path) -> None:
    for place in {p.path for p in release.PLACES} | {release.RELEASES, release.VERSIONS_PAGE}:
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / place, tmp_path / place)
    pom = tmp_path / "jobs" / "jvm-listener" / "pom.xml"
    version = release.tree_version()
    pom.write_text(
        pom.read_text().replace(f"<version>{version}</version>", "<version>9.9.9</version>", 1)
    )
    assert release.stamp(tmp_path, release.tree_versions(), check=True) == [pom]


def test_the_command_line_says_its_release(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"offset-sidecar {release.tree_version()}"
    assert __version__ == release.tree_version()


def test_the_changelog_has_an_entry_per_release_with_its_date() -> None:
    """``## <version> - <date>`` or ``## <version> - unreleased``, newest first."""
    headings = re.findall(
        r"^## (\d+\.\d+\.\d+) - (\S+)$", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    recorded = [(e["version"], e.get("date", "unreleased")) for e in release.releases()]
    assert headings == recorded


def _repo(tmp_path: Path, first: str) -> Path:
    """A git repository with releases.toml (``first`` its first entry) and one commit."""
    (tmp_path / "releases.toml").write_text(
        first + '\n[[release]]\nversion = "0.1.0"\nchart = "0.4.0"\ndate = "2026-11-29"\n'
    )
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    return tmp_path


def _tag(repo: Path, tag: str) -> None:
    subprocess.run(["git", "-C", str(repo), "tag", tag], check=True)


UNRELEASED = '[[release]]\nversion = "0.2.0"\nchart = "0.5.0"\n'
RELEASED = UNRELEASED + 'date = "2026-12-24"\n'


def test_an_untagged_tree_is_a_development_build(tmp_path: Path) -> None:
    built = release.build(_repo(tmp_path, UNRELEASED))
    assert (built.version, built.chart, built.release) == ("0.2.0.dev0", "0.5.0-dev0", False)
    with pytest.raises(release.Refused, match="not a release"):
        release.build(tmp_path, release_only=True)


def test_a_clean_tree_on_its_tag_is_the_release_and_a_dirty_one_is_not(tmp_path: Path) -> None:
    repo = _repo(tmp_path, RELEASED)
    _tag(repo, "v0.2.0")
    built = release.build(repo, release_only=True)
    assert (built.version, built.chart, built.release) == ("0.2.0", "0.5.0", True)
    (repo / "new.txt").write_text("not committed")
    with pytest.raises(release.Refused, match="is released"):
        release.build(repo)


def test_a_tag_of_another_version_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, UNRELEASED)
    _tag(repo, "v0.3.0")
    with pytest.raises(release.Refused, match=r"tagged v0\.3\.0, but releases\.toml"):
        release.build(repo)


def test_a_tag_before_the_release_is_recorded_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, UNRELEASED)
    _tag(repo, "v0.2.0")
    with pytest.raises(release.Refused, match="no date"):
        release.build(repo)


def _releases_toml(root: Path, *entries: str) -> Path:
    root.mkdir()
    (root / "releases.toml").write_text("\n".join(f"[[release]]\n{e}\n" for e in entries))
    return root


def test_the_previous_release_is_the_newest_recorded_before_the_trees(tmp_path: Path) -> None:
    """What the upgrade tests start from (``harness.releases``): the newest entry recorded
    with its commit, other than the version the tree builds (released yet or not)."""
    from harness.releases import Release, previous_release

    recorded = [Release(e["version"], e["commit"]) for e in release.releases() if e.get("commit")]
    assert previous_release() in recorded
    assert previous_release().version != release.tree_version()
    old, new = "a" * 40, "b" * 40
    opened = _releases_toml(
        tmp_path / "opened",
        'version = "0.3.0"',
        f'version = "0.2.0"\ndate = "2027-01-01"\ncommit = "{new}"',
        f'version = "0.1.0"\ndate = "2026-11-29"\ncommit = "{old}"',
    )
    assert previous_release(opened) == Release("0.2.0", new)
    released = _releases_toml(
        tmp_path / "released",
        f'version = "0.2.0"\ndate = "2027-01-01"\ncommit = "{new}"',
        f'version = "0.1.0"\ndate = "2026-11-29"\ncommit = "{old}"',
    )
    assert previous_release(released) == Release("0.1.0", old)


def test_a_clone_without_a_releases_commit_is_told_how_to_fetch_it(tmp_path: Path) -> None:
    from harness.releases import Release, sources

    with pytest.raises(RuntimeError, match=r"does not have.*git fetch origin f{40}"):
        sources(Release("0.0.1", "f" * 40), tmp_path / "source")
    assert not (tmp_path / "source").exists()
