"""A refusal that needs an extra says how to get it from what users have: no package index
publishes the service, so it names the extra's packages (from the installed service's
own metadata) and the service's wheel with the extra, never ``pip install
'spark-offset-sidecar[...]'``."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import fsspec
import pytest

from harness.machine import ROOT
from spark_offset_sidecar.adapters.checkpoints.fsspec_storage import check_path
from spark_offset_sidecar.errors import install_extra

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = sorted(set(PYPROJECT["project"]["optional-dependencies"]) - {"spark", "dev"})
# Refusals in the settings, whose code another change rewrites: they still send users to
# an index. Drop a file from here when it names install_extra's way (the test fails until
# then, so that the exemption does not outlive the refusal).
STILL_TO_FIX: set[str] = set()
TO_AN_INDEX = re.compile(r"pip install '?spark-offset-sidecar\[")


@pytest.mark.parametrize("extra", EXTRAS)
def test_the_hint_names_the_extras_packages_and_the_services_wheel(extra: str) -> None:
    hint = install_extra(extra)
    version = metadata.version("spark-offset-sidecar")
    assert f"pip install 'spark_offset_sidecar-{version}-py3-none-any.whl[{extra}]'" in hint
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]
        assert f"pip install '{name}" in hint or f" '{name}" in hint, (hint, requirement)
    assert not TO_AN_INDEX.search(hint)


def test_no_refusal_sends_users_to_a_package_index() -> None:
    source = ROOT / "service" / "spark_offset_sidecar"
    found = {
        str(path.relative_to(source))
        for path in source.rglob("*.py")
        if TO_AN_INDEX.search(path.read_text())
    }
    assert found - STILL_TO_FIX == set(), "refusals that name an index: use install_extra"
    assert found >= STILL_TO_FIX, f"fixed: drop {sorted(STILL_TO_FIX - found)} from STILL_TO_FIX"


def test_a_folder_whose_package_is_missing_is_refused_with_the_way_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(protocol: str) -> type:
        raise ImportError(f"no {protocol}")

    monkeypatch.setattr(fsspec, "get_filesystem_class", missing)
    refusal = check_path("s3a://bucket/checkpoints/orders") or ""
    assert refusal.startswith("s3:// needs a package that is not installed: ")
    assert "pip install 's3fs" in refusal
    assert "py3-none-any.whl[s3]'" in refusal
