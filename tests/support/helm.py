"""The Helm chart as helm renders it (helm is built from the Go module proxy by
``make tools``), for the tests of the chart and of its alerts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.machine import ROOT, refuse_in_inner_loop

CHART = ROOT / "helm" / "spark-offset-sidecar"
PRODUCTION = CHART / "ci" / "production-values.yaml"
KUBERNETES = "1.30.0"
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.78.2"


def prometheus_operator_crds() -> Path:
    """The folder of the Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule, ...),
    from the Go module proxy's copy of its module (``make tools`` downloads it)."""
    found = subprocess.run(
        ["go", "mod", "download", "-json", PROMETHEUS_OPERATOR],
        check=True, capture_output=True, text=True, cwd="/tmp",
    )  # fmt: skip
    return Path(json.loads(found.stdout)["Dir"]) / "example" / "prometheus-operator-crd"


def helm() -> str:
    refuse_in_inner_loop("runs helm (built by `make tools`)")
    found = ROOT / ".local" / "bin" / "helm"
    if found.exists():
        return str(found)
    on_path = shutil.which("helm")
    if on_path is None:
        pytest.fail("helm is missing: run `make tools`")
    return on_path


def render(*args: str) -> list[dict[str, Any]]:
    """The chart as release ``r`` in namespace ``data``, with ``args`` (values)."""
    return _template("r", "--namespace", "data", *args)


def _template(release: str, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [helm(), "template", release, str(CHART), "--kube-version", KUBERNETES, *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return [doc for doc in yaml.safe_load_all(out) if doc]


def refused(*args: str) -> str:
    done = subprocess.run(
        [helm(), "template", "r", str(CHART), "--kube-version", KUBERNETES, *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0, "helm rendered what it should refuse"
    return done.stderr


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        kinds.setdefault(doc["kind"], []).append(doc)
    return kinds


def render_as(install: str) -> list[dict[str, Any]]:
    """What ``install``, a manual's ``helm install RELEASE CHART ...`` line, makes: the
    same release, namespace and values, as ``helm template`` renders them."""
    import shlex

    words = shlex.split(install)
    assert words[:2] == ["helm", "install"], install
    release, chart, *args = words[2:]
    # the release's chart from its registry, by version: this chart, as it is published
    assert chart == "oci://$OCI_REGISTRY/charts/spark-offset-sidecar", install
    assert args[:2] == ["--version", "$CHART_VERSION"], install
    args = [a for a in args[2:] if a != "--create-namespace"]  # the cluster's, not the chart's

    def values(path: str) -> str:  # a values file of the repository, or of the archive
        return str(ROOT / path if (ROOT / path).exists() else CHART.parent / path)

    return _template(release, *(values(a) if a.endswith(".yaml") else a for a in args))
