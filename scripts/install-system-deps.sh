#!/usr/bin/env bash
# Debian packages the tests use (`make test`, `make check`; `make demo` needs none of
# them), installed when missing:
#   kcat        a real Kafka client (librdkafka) to check what the broker holds
#   postgresql  a real PostgreSQL server for the store's tests (the tests start their own)
#   burrow      LinkedIn's Burrow, the lag tool the tests check the product against
#   zookeeper   only for Burrow, which needs one for itself (scripts/local-burrow.sh)
#   prometheus  a real Prometheus and promtool, for the chart's alerts (tests/e2e/test_alerts.py)
#   chromium    a real headless browser, for the status page (tests/e2e/test_status_page.py)
#   wrk         a light HTTP load generator in C, for bench/http_throughput.py
#   npm         Node's package manager (and Node): Azurite, the Azure Storage emulator of the
#               follower's abfs:// tests, comes from npm (make tools)
#   podman, runc, mmdebstrap
#               build the project's image and run the chart's pod (tests/e2e/test_container.py);
#               mmdebstrap makes the base image from Debian packages (no registry needed)
# Java 17+ must already be there (it runs the Kafka and Spark jars). Maven is installed
# when missing; without root, scripts/mvn.sh fetches it from Maven Central instead.
set -euo pipefail
missing=()
command -v java >/dev/null || { echo "java (17 or newer) is required" >&2; exit 1; }
command -v mvn >/dev/null || missing+=(maven)
command -v kcat >/dev/null || missing+=(kcat)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v Burrow >/dev/null || missing+=(burrow)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v promtool >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
command -v wrk >/dev/null || missing+=(wrk)
command -v npm >/dev/null || missing+=(npm)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || missing+=(runc)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
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
