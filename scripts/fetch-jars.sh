#!/usr/bin/env bash
# Fetch jars from Maven Central into .local/jars (cached; a second run is a no-op).
#
#   scripts/fetch-jars.sh kafka [VERSION] the Apache Kafka broker (for local-kafka.sh;
#                                         default: the POM's version, 4.1.1)
#   scripts/fetch-jars.sh spark [PYTHON]  Spark's Kafka connector for the pyspark that
#                                         PYTHON (default .venv/bin/python) has installed
#   scripts/fetch-jars.sh spark-connect [PYTHON]
#                                         the Spark Connect server for that pyspark, when
#                                         its wheel lacks it (3.5; 4.x wheels ship it:
#                                         then an empty folder)
#
# Prints the folder that holds the jars.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jars_root=${SIDECAR_JARS_DIR:-$root/.local/jars}
settings=$root/scripts/maven/settings.xml

fetch() {  # fetch POM_DIR OUT_DIR [maven -D args...]
  local pom_dir=$1 out=$2
  shift 2
  if [ -f "$out/.complete" ]; then
    echo "$out"
    return
  fi
  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  echo "fetching $(basename "$out") jars from Maven Central..." >&2
  mvn -B -q -Dstyle.color=never -s "$settings" -f "$pom_dir/pom.xml" "$@" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out.partial" >&2
  touch "$out.partial/.complete"
  rm -rf "$out"
  mv "$out.partial" "$out"
  echo "$out"
}

case "${1:-}" in
  kafka)
    if [ -n "${2:-}" ]; then
      fetch "$root/scripts/maven/kafka-broker" "$jars_root/kafka-broker-$2" "-Dkafka.version=$2"
    else
      fetch "$root/scripts/maven/kafka-broker" "$jars_root/kafka-broker"
    fi
    ;;
  spark)
    python=${2:-$root/.venv/bin/python}
    pyspark_dir=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
    version=$("$python" -c 'import pyspark; print(pyspark.__version__)')
    out="$jars_root/spark-kafka-$version"
    if [ ! -f "$out/.complete" ]; then
      scala=2.13
      case "$version" in 3.*) scala=2.12 ;; esac  # Spark 3.5 ships Scala 2.12 jars
      fetch "$root/scripts/maven/spark-kafka" "$out" "-Dspark.version=$version" \
        "-Dscala.binary=$scala" >/dev/null
      # Keep only what pyspark does not ship already: two copies of a class on the
      # driver's classpath is how linkage errors start.
      for jar in "$out"/*.jar; do
        artifact=$(basename "$jar" | sed -E 's/-[0-9][^-]*\.jar$//')
        if compgen -G "$pyspark_dir/jars/$artifact-[0-9]*.jar" >/dev/null; then
          rm "$jar"
        fi
      done
    fi
    echo "$out"
    ;;
  spark-connect)
    python=${2:-$root/.venv/bin/python}
    version=$("$python" -c 'import pyspark; print(pyspark.__version__)')
    out="$jars_root/spark-connect-$version"
    case "$version" in
      3.*) fetch "$root/scripts/maven/spark-connect" "$out" "-Dspark.version=$version" \
             "-Dscala.binary=2.12" -DexcludeTransitive=true >/dev/null ;;
      *) mkdir -p "$out" ;;  # pyspark 4's wheel has jars/spark-connect_2.13-*.jar
    esac
    echo "$out"
    ;;
  *)
    echo "usage: $0 kafka [VERSION] | spark [PYTHON] | spark-connect [PYTHON]" >&2
    exit 2
    ;;
esac
