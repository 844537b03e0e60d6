#!/usr/bin/env bash
# Build the JVM listener (jobs/jvm-listener, Maven, Java 17) into the machine's cache
# (SPARK_OFFSET_SIDECAR_CACHE, default ~/.cache/spark-offset-sidecar), keyed by a hash of its
# POM and sources, linked from .local/jars/jvm-listener in this checkout. A second run, or a
# second clone of the same sources, builds nothing. Prints the jar's path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
project=$root/jobs/jvm-listener
settings=$root/scripts/maven/settings.xml
cache=${SPARK_OFFSET_SIDECAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-offset-sidecar}/jars
key=$(cd "$project" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
real=$cache/jvm-listener-$key
link=$root/.local/jars/jvm-listener
jar=spark-offset-sidecar-listener.jar
mkdir -p "$cache" "$(dirname "$link")"
(
  flock 9
  if [ ! -f "$real/$jar" ]; then
    echo "building the JVM listener (Maven)..." >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cp -r "$project/pom.xml" "$project/src" "$work/"
    "$root/scripts/mvn.sh" -B -q -Dstyle.color=never -s "$settings" -f "$work/pom.xml" package >&2
    mkdir -p "$real.partial"
    cp "$work/target/$jar" "$real.partial/"
    rm -rf "$real"
    mv "$real.partial" "$real"
  fi
) 9>"$real.lock"
if [ "$(readlink "$link" 2>/dev/null)" != "$real" ]; then
  rm -rf "$link"
  ln -s "$real" "$link"
fi
echo "$link/$jar"
