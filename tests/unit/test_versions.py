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
import yaml

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


def test_the_projects_address_changed_once_is_written_everywhere(tmp_path: Path) -> None:
    """``home`` and ``manual`` in releases.toml's ``[project]`` are the only definition:
    ``stamp`` writes a new one into every file that shows them, leaving no old one."""
    paths = {p.path for p in release.PLACES} | {release.RELEASES, release.VERSIONS_PAGE}
    for place in paths:
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / place, tmp_path / place)
    old = release.addresses()
    toml = tmp_path / release.RELEASES
    new = {"home": "https://git.test/sos", "manual": "https://docs.test/sos/"}
    for key in new:
        toml.write_text(toml.read_text().replace(f'{key} = "{old[key]}"', f'{key} = "{new[key]}"'))
    assert release.addresses(tmp_path) == new
    release.stamp(tmp_path, release.tree_versions(tmp_path))
    wanted = release.tree_versions(tmp_path)
    for place, found in release.found_versions(tmp_path):
        assert found == {wanted[place.field]}, f"{place.path}: {found}"
    for place in paths - {release.RELEASES}:
        assert old["home"] not in (tmp_path / place).read_text(), place


def _image_tags(values: object) -> list[object]:
    """Every ``image.tag`` in a values document, however deep."""
    found: list[object] = []
    if isinstance(values, dict):
        for key, value in values.items():
            if key == "image" and isinstance(value, dict) and "tag" in value:
                found.append(value["tag"])
            found += _image_tags(value)
    elif isinstance(values, list):
        for item in values:
            found += _image_tags(item)
    return found


def test_no_values_file_of_the_chart_pins_another_image_tag() -> None:
    """Values a user installs with (the defaults and the examples in ci/) run the image of
    the chart's release: no tag (the chart's appVersion) or that very version."""
    chart = ROOT / "helm" / "spark-offset-sidecar"
    app_version = yaml.safe_load((chart / "Chart.yaml").read_text())["appVersion"]
    files = [chart / "values.yaml", *sorted((chart / "ci").glob("*.yaml"))]
    assert len(files) > 1
    for path in files:
        for tag in _image_tags(yaml.safe_load(path.read_text())):
            assert tag in ("", None, app_version), (
                f"{path.relative_to(ROOT)}: image.tag {tag!r} pins an image other than the "
                f"chart's ({app_version}): leave it out"
            )


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


UNRELEASED = '[[release]]\nversion = "0.2.0"\nchart = "0.5.0"\n'
RELEASED = UNRELEASED + 'date = "2026-12-24"\n'


def test_an_undated_first_entry_is_a_development_build(tmp_path: Path) -> None:
    built = release.build(_repo(tmp_path, UNRELEASED))
    assert (built.version, built.chart, built.release) == ("0.2.0.dev0", "0.5.0-dev0", False)
    with pytest.raises(release.Refused, match="not a release"):
        release.build(tmp_path, release_only=True)


def test_the_clean_commit_that_dates_it_is_the_release_and_no_other_tree(tmp_path: Path) -> None:
    """No tag needed: a fresh clone of the commit rebuilds the release; a dirty tree is
    refused, and so is any commit but the one releases.toml records."""
    repo = _repo(tmp_path, RELEASED)
    built = release.build(repo, release_only=True)
    assert (built.version, built.chart, built.release) == ("0.2.0", "0.5.0", True)
    assert (
        built.commit
        == subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    )
    (repo / "new.txt").write_text("not committed")
    with pytest.raises(release.Refused, match="clean git checkout of its commit"):
        release.build(repo)


def test_a_recorded_release_is_built_from_its_commit_alone(tmp_path: Path) -> None:
    repo = _repo(tmp_path, RELEASED + f'commit = "{"a" * 40}"\n')
    with pytest.raises(release.Refused, match=f"released from commit {'a' * 40}"):
        release.build(repo)


def test_the_pages_name_the_newest_release_not_the_trees_version(tmp_path: Path) -> None:
    opened = _releases_toml(
        tmp_path / "opened",
        'version = "0.3.0"\nchart = "0.6.0"',
        'version = "0.2.0"\nchart = "0.5.0"\ndate = "2027-01-01"',
    )
    (opened / "docs").mkdir()
    page = opened / "docs" / "install.md"
    page.write_text(
        "    VERSION=0.1.0\nCHART_VERSION=0.4.0\nFor 0.1.0 (chart 0.4.0): "
        "spark_offset_listener-0.1.0-py3-none-any.whl. For 4.2.0 jobs, Spark's own.\n"
    )
    assert release.pages_stamped(opened)[page] == (
        "    VERSION=0.2.0\nCHART_VERSION=0.5.0\nFor 0.2.0 (chart 0.5.0): "
        "spark_offset_listener-0.2.0-py3-none-any.whl. For 4.2.0 jobs, Spark's own.\n"
    )


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


def test_a_cut_release_is_recorded_and_a_rebuild_is_held_to_its_checksums(
    tmp_path: Path,
) -> None:
    """``record`` writes the folder's commit and checksums under its entry and opens the
    next version; ``verify`` names every file a rebuild changed, added or lost."""
    repo = _releases_toml(
        tmp_path / "repo",
        'version = "0.2.0"\nchart = "0.5.0"\ndate = "2026-12-24"',
        f'version = "0.1.0"\nchart = "0.4.0"\ndate = "2026-11-29"\ncommit = "{"a" * 40}"',
    )
    folder = tmp_path / "dist"
    folder.mkdir()
    (folder / "build.json").write_text(
        '{"version": "0.2.0", "chart": "0.5.0", "release": true, "commit": "' + "b" * 40 + '"}'
    )
    (folder / "x.whl").write_bytes(b"wheel")
    (folder / "spark-offset-sidecar-image-0.2.0.oci.tar").write_bytes(b"image")
    (folder / "SHA256SUMS").write_text("not itself recorded")
    release.record(repo, folder, "0.3.0", "0.6.0")
    opened, cut, first = release.releases(repo)
    assert (opened["version"], opened.get("date")) == ("0.3.0", None)
    assert (cut["commit"], cut["date"], first["commit"]) == ("b" * 40, "2026-12-24", "a" * 40)
    assert set(cut["sha256"]) == {"build.json", "x.whl", "spark-offset-sidecar-image-0.2.0.oci.tar"}
    assert release.verify(repo, folder) == []
    (folder / "x.whl").write_bytes(b"wheel, rebuilt")
    (folder / "extra.txt").write_text("")
    assert release.verify(repo, folder) == ["extra.txt: not recorded", "x.whl: differs"]
    # the image resolves Debian's and Python's packages as it is built: reported, not held
    (folder / "spark-offset-sidecar-image-0.2.0.oci.tar").write_bytes(b"image, newer packages")
    assert "spark-offset-sidecar-image-0.2.0.oci.tar" in release.compared(repo, folder)
    assert release.verify(repo, folder) == ["extra.txt: not recorded", "x.whl: differs"]
    with pytest.raises(release.Refused, match="record the folder"):
        release.record(repo, folder, "0.4.0", "0.7.0")  # 0.3.0 is not this folder's
