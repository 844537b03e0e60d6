#!/usr/bin/env bash
# Fetch jars from Maven Central into a cache shared by every checkout on the machine
# (SPARK_OFFSET_SIDECAR_CACHE, default ~/.cache/spark-offset-sidecar), in a folder keyed by
# what the jars are made of (the POM, Maven's settings and the versions asked for), linked
# from .local/jars/<name> in this checkout. A second run, or a second clone, is a no-op.
#
#   scripts/fetch-jars.sh kafka [VERSION] the Apache Kafka broker (for local-kafka.sh;
#                                         default: the POM's version, 4.4.0)
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
jars_root=${OFFSET_SIDECAR_JARS_DIR:-$root/.local/jars}
cache=${SPARK_OFFSET_SIDECAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-offset-sidecar}/jars
settings=$root/scripts/maven/settings.xml

key() {  # key FILE... -- WORDS...: a short hash of the files' contents and the words
  local files=() words=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do files+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  words=("$@")
  { cat "${files[@]}"; printf '%s\n' "${words[@]}"; } | sha256sum | cut -c1-12
}

fetch() {  # fetch POM_DIR OUT_DIR [maven -D args...]: OUT_DIR ends up a link into the cache
  local pom_dir=$1 out=$2
  shift 2
  local real
  real="$cache/$(basename "$out")-$(key "$pom_dir/pom.xml" "$settings" -- "$@")"
  mkdir -p "$cache" "$(dirname "$out")"
  (
    flock 9  # two checkouts fetching the same jars at once: one fetches, one waits
    if [ ! -f "$real/.complete" ]; then
      rm -rf "$real.partial"
      mkdir -p "$real.partial"
      echo "fetching $(basename "$out") jars from Maven Central..." >&2
      "$root/scripts/mvn.sh" -B -q -Dstyle.color=never -s "$settings" -f "$pom_dir/pom.xml" "$@" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$real.partial" >&2
      touch "$real.partial/.complete"
      rm -rf "$real"
      mv "$real.partial" "$real"
    fi
  ) 9>"$real.lock"
  link "$real" "$out"
  echo "$out"
}

link() {  # link REAL OUT: OUT (in the checkout) points at REAL (in the cache)
  if [ "$(readlink "$2" 2>/dev/null)" != "$1" ]; then
    rm -rf "$2"
    ln -s "$1" "$2"
  fi
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
    scala=2.13
    case "$version" in 3.*) scala=2.12 ;; esac  # Spark 3.5 ships Scala 2.12 jars
    fetch "$root/scripts/maven/spark-kafka" "$out" "-Dspark.version=$version" \
      "-Dscala.binary=$scala" >/dev/null
    # Keep only what pyspark does not ship already: two copies of a class on the
    # driver's classpath is how linkage errors start. (Idempotent: the same pyspark
    # version ships the same jars, so every checkout prunes the cached folder alike.)
    for jar in "$out"/*.jar; do
      artifact=$(basename "$jar" | sed -E 's/-[0-9][^-]*\.jar$//')
      if compgen -G "$pyspark_dir/jars/$artifact-[0-9]*.jar" >/dev/null; then
        rm -f "$jar"
      fi
    done
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
