"""One place that gives a SparkSession able to read Kafka.

pyspark's wheel carries no Kafka connector. ``scripts/fetch-jars.sh spark`` fetches
``spark-sql-kafka-0-10`` for exactly the installed pyspark version (plus the runtime
dependencies pyspark does not ship) into ``.local/jars/spark-kafka-<version>``; this module
finds them, fetching on first use when run from a checkout, and hands them to Spark
through ``spark.jars``.

Set ``OFFSET_SIDECAR_SPARK_KAFKA_JARS`` to a folder of jars to use another location.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_ENV = "OFFSET_SIDECAR_SPARK_KAFKA_JARS"
_CHECKOUT = Path(__file__).resolve().parent.parent
_FETCH_SCRIPT = _CHECKOUT / "scripts" / "fetch-jars.sh"


class ConnectorJarsMissing(RuntimeError):
    """The Kafka connector jars for this pyspark are not available."""


def kafka_connector_jars() -> list[str]:
    """Absolute paths of the connector jars for the installed pyspark version."""
    import pyspark

    configured = os.environ.get(JARS_ENV)
    if configured:
        folder = Path(configured)
    else:
        folder = _CHECKOUT / ".local" / "jars" / f"spark-kafka-{pyspark.__version__}"
        if not (folder / ".complete").exists() and _FETCH_SCRIPT.exists():
            import sys

            subprocess.run(
                [str(_FETCH_SCRIPT), "spark", sys.executable],
                check=True,
                stdout=subprocess.DEVNULL,
            )
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not any("spark-sql-kafka" in Path(jar).name for jar in jars):
        raise ConnectorJarsMissing(
            f"no spark-sql-kafka jar for pyspark {pyspark.__version__} in {folder}; "
            f"run scripts/fetch-jars.sh spark or set {JARS_ENV}"
        )
    return jars


def _launcher_conf() -> dict[str, str]:
    """What ``spark-submit`` configured, if it started this driver (PySpark then connects
    to its JVM through ``PYSPARK_GATEWAY_PORT``); empty otherwise, without starting a JVM
    early (which would lose settings such as the driver's memory)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; starts none
    return dict(SparkConf().getAll())


def _connector_configured(*confs: dict[str, str]) -> bool:
    """True when ``--jars``/``--packages`` (or ``conf``) already bring the connector."""
    keys = ("spark.jars", "spark.jars.packages")
    return any("spark-sql-kafka" in conf.get(key, "") for conf in confs for key in keys)


def kafka_spark_session(
    app_name: str,
    *,
    master: str | None = "local[2]",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """A SparkSession (created or reused) with the Kafka connector on its classpath.

    Under ``spark-submit``, its ``--master`` and ``--jars``/``--packages`` win."""
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    launcher = _launcher_conf()
    builder = SparkSession.builder.appName(app_name)
    if master and "spark.master" not in launcher:
        builder = builder.master(master)
    if not _connector_configured(launcher, conf):
        builder = builder.config("spark.jars", ",".join(kafka_connector_jars()))
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "1g"))
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session: SparkSession = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    return session
