#!/usr/bin/env bash
# Maven, as the scripts call it: the `mvn` on PATH when there is one, else Apache Maven
# fetched once from Maven Central into the shared cache (no root, no system package;
# Java 17 is the only thing it needs). Arguments go to Maven unchanged.
#
# Maven Central, looked up 2026-11-25: org.apache.maven:apache-maven 3.9.16, bin.tar.gz,
# with its .sha512 (checked before unpacking).
set -euo pipefail

# Maven's output and errors, on its output, as plain text: Debian's Maven 3.8 writes colour
# codes (ESC[0m) even in batch mode with -Dstyle.color=never. Maven's exit status stays.
plain() {
  "$@" 2>&1 | sed -u -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d'
}

if command -v mvn >/dev/null; then
  plain mvn "$@"
  exit
fi
version=3.9.16
cache=${SPARK_OFFSET_SIDECAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-offset-sidecar}/tools
home="$cache/apache-maven-$version"
if [ ! -x "$home/bin/mvn" ]; then
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -x "$home/bin/mvn" ]; then
      url="https://repo1.maven.org/maven2/org/apache/maven/apache-maven/$version/apache-maven-$version-bin.tar.gz"
      echo "no mvn on PATH: fetching Apache Maven $version from Maven Central..." >&2
      python3 - "$url" "$cache/maven.tar.gz" <<'PY'
import hashlib, sys, urllib.request
url, out = sys.argv[1], sys.argv[2]
data = urllib.request.urlopen(url, timeout=120).read()
expected = urllib.request.urlopen(url + ".sha512", timeout=60).read().decode().split()[0]
if hashlib.sha512(data).hexdigest() != expected:
    sys.exit(f"{url}: the download does not match its .sha512")
open(out, "wb").write(data)
PY
      rm -rf "$home.partial"
      mkdir -p "$home.partial"
      tar -xzf "$cache/maven.tar.gz" -C "$home.partial" --strip-components=1
      rm -f "$cache/maven.tar.gz"
      mv "$home.partial" "$home"
    fi
  ) 9>"$cache/maven.lock"
fi
plain "$home/bin/mvn" "$@"
