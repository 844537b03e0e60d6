#!/usr/bin/env bash
# Debian packages, installed when missing: with no argument, every one below, what the tests
# use (`make test`, `make check`); with `dist`, only those marked dist, what `make dist` uses
# (`make dist-deps`). `make demo` needs none of them.
#   podman, runc, mmdebstrap                                                         (dist)
#               build the project's image (scripts/dist.py, harness/pod.py) and run the
#               chart's pod (tests/e2e/test_container.py); mmdebstrap makes the image's
#               bases from Debian packages (no registry needed)
#   kcat        a real Kafka client (librdkafka) to check what the broker holds
#   postgresql  a real PostgreSQL server for the store's tests (the tests start their own)
#   burrow      LinkedIn's Burrow, the lag tool the tests check the product against
#   zookeeper   only for Burrow, which needs one for itself (scripts/local-burrow.sh)
#   prometheus  a real Prometheus and promtool, for the chart's alerts (tests/e2e/test_alerts.py)
#   chromium    a real headless browser, for the status page (tests/e2e/test_status_page.py)
#   wrk         a light HTTP load generator in C, for bench/http_throughput.py
#   npm         Node's package manager (and Node): Azurite, the Azure Storage emulator of the
#               follower's abfs:// tests, comes from npm (make tools)
#   maven       builds the JVM listener; without it (and for make dist, which does not
#               install it), scripts/mvn.sh fetches Maven from Maven Central instead
#   gnupg       gpg and its agent: a maintainer's signing of the JVM listener, as
#               docs/versions.md says, run with a key of the test's (tests/e2e/test_dist.py)
#   containerd, containernetworking-plugins, gcc, libc6-dev
#               the Kubernetes node of the chart's test (harness/kube_node.py): the runtime
#               the kubelet drives, the pod network (bridge), the pause image's static binary
#   sqlite3     the SQLite shell the upgrade page checks a backup with (docs/run/upgrade.md,
#               run by tests/e2e/test_kubernetes_node.py)
# Java 17+ must already be there (it runs Maven, and the Kafka and Spark jars).
set -euo pipefail
mode=${1:-test}
case "$mode" in
  test | dist) ;;
  *) echo "usage: $0 [dist]   (no argument: every package the tests use)" >&2; exit 2 ;;
esac
missing=()
# need FOR PACKAGE CHECK...: PACKAGE is missing when CHECK fails; FOR is dist (make dist and
# the tests) or test (the tests alone)
need() {
  local for=$1 package=$2
  shift 2
  [ "$for" = dist ] || [ "$mode" = test ] || return 0
  "$@" >/dev/null 2>&1 || missing+=("$package")
}
runc_present() { command -v runc || [ -x /usr/sbin/runc ]; }
gpg_present() { command -v gpg && command -v gpg-agent; }
command -v java >/dev/null || { echo "java (17 or newer) is required" >&2; exit 1; }
need dist podman command -v podman
need dist runc runc_present
need dist mmdebstrap command -v mmdebstrap
need test maven command -v mvn
need test kcat command -v kcat
need test postgresql compgen -G "/usr/lib/postgresql/*/bin/initdb"
need test burrow command -v Burrow
need test zookeeper test -f /usr/share/java/zookeeper.jar
need test prometheus command -v promtool
need test chromium command -v chromium
need test wrk command -v wrk
need test npm command -v npm
need test gnupg gpg_present
need test containerd command -v containerd
need test containernetworking-plugins test -x /usr/lib/cni/bridge
need test gcc command -v gcc
need test libc6-dev compgen -G "/usr/lib/*/libc.a"
need test sqlite3 command -v sqlite3
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
  echo "please install these Debian packages: ${missing[*]}" >&2
  exit 1
fi
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
echo "installing Debian packages: ${missing[*]}" >&2
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
