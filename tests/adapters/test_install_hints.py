"""A refusal that needs an extra says how to get it, at the installed service's version:
``pip install 'spark-offset-sidecar[extra]==V'`` from the index the service came from (a
release is published to one: docs/versions.md), or, air-gapped, the release folder's
wheel with the extra. No refusal writes an install line of its own."""

from __future__ import annotations

import tomllib
from importlib import metadata

import fsspec
import pytest

from harness.machine import ROOT
from spark_offset_sidecar.adapters.checkpoints.fsspec_storage import check_path
from spark_offset_sidecar.errors import install_extra

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = sorted(set(PYPROJECT["project"]["optional-dependencies"]) - {"spark", "dev"})


@pytest.mark.parametrize("extra", EXTRAS)
def test_the_hint_names_the_extra_by_version_and_the_release_folders_wheel(extra: str) -> None:
    hint = install_extra(extra)
    version = metadata.version("spark-offset-sidecar")
    assert hint.startswith(f"install the {extra} extra: ")
    assert f"pip install 'spark-offset-sidecar[{extra}]=={version}'" in hint
    assert f"pip install 'spark_offset_sidecar-{version}-py3-none-any.whl[{extra}]'" in hint


def test_no_refusal_writes_an_install_line_of_its_own() -> None:
    """Every way to install an extra comes from ``install_extra``, so that one change
    keeps them all true."""
    source = ROOT / "service" / "spark_offset_sidecar"
    found = {
        str(path.relative_to(source))
        for path in source.rglob("*.py")
        if "pip install" in path.read_text()
    }
    assert found == {"errors.py"}, "refusals that write their own install line: use install_extra"


def test_a_folder_whose_package_is_missing_is_refused_with_the_way_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(protocol: str) -> type:
        raise ImportError(f"no {protocol}")

    monkeypatch.setattr(fsspec, "get_filesystem_class", missing)
    refusal = check_path("s3a://bucket/checkpoints/orders") or ""
    assert refusal.startswith("s3:// needs a package that is not installed: ")
    assert "pip install 'spark-offset-sidecar[s3]==" in refusal
    assert "py3-none-any.whl[s3]'" in refusal
