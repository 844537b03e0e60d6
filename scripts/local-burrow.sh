#!/usr/bin/env bash
# LinkedIn's Burrow (Debian package `burrow`), watching a local Kafka: the lag tool that
# proves the point of the sidecar (it sees a Spark job's group once the sidecar commits).
#
#   scripts/local-burrow.sh start BOOTSTRAP   start ZooKeeper + Burrow, print Burrow's URL
#   scripts/local-burrow.sh stop              stop both
#   scripts/local-burrow.sh status GROUP      Burrow's status JSON of GROUP
#
# Environment: LOCAL_BURROW_DIR (default .local/burrow), LOCAL_BURROW_PORT (default 8111).
#
# Facts: Burrow 1.x needs ZooKeeper for itself (its coordinator panics without servers);
# Debian's zookeeper package provides the jar, run here standalone on a free port. Debian's
# Burrow is 1.2.1: its Kafka client sends Metadata v1, which Kafka 4 no longer serves
# (KIP-896), and it cannot decode Kafka 4's offset-commit records (value version 4). Point
# it at a Kafka 3.x broker (LOCAL_KAFKA_VERSION=3.9.1 scripts/local-kafka.sh start).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${LOCAL_BURROW_DIR:-$root/.local/burrow}
port=${LOCAL_BURROW_PORT:-8111}

free_port() {
  python3 "$root/scripts/free_port.py"
}

stop_pid() {
  local pidfile=$1
  if [ -f "$pidfile" ]; then
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  fi
}

start() {
  local bootstrap=${1:?usage: $0 start BOOTSTRAP}
  command -v Burrow >/dev/null || { echo "Burrow is missing: scripts/install-system-deps.sh" >&2; exit 1; }
  [ -f /usr/share/java/zookeeper.jar ] || { echo "ZooKeeper is missing: scripts/install-system-deps.sh" >&2; exit 1; }
  mkdir -p "$dir/zk-data"
  local zk_port
  zk_port=$(free_port)
  cat >"$dir/zoo.cfg" <<CONF
tickTime=2000
dataDir=$dir/zk-data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
CONF
  java -Xmx128m -cp /usr/share/java/zookeeper.jar \
    org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" >"$dir/zookeeper.log" 2>&1 </dev/null &
  echo $! >"$dir/zookeeper.pid"
  # Ready when it answers "srvr" (a listening port alone is not: Burrow's first session
  # then fails and it exits).
  for _ in $(seq 1 150); do
    python3 - "$zk_port" 2>/dev/null <<'PY' && break
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1) as s:
    s.sendall(b"srvr")
    sys.exit(0 if b"Mode: standalone" in s.recv(4096) else 1)
PY
    sleep 0.2
  done
  cat >"$dir/burrow.toml" <<CONF
[general]
pidfile="$dir/burrow.pid.burrow"
[logging]
level="info"
[zookeeper]
servers=["127.0.0.1:$zk_port"]
timeout=6
root-path="/burrow"
[client-profile.local]
client-id="burrow"
kafka-version="2.0.0"
[cluster.local]
class-name="kafka"
servers=["$bootstrap"]
client-profile="local"
topic-refresh=10
offset-refresh=2
[consumer.local]
class-name="kafka"
cluster="local"
servers=["$bootstrap"]
client-profile="local"
start-latest=false
[httpserver.default]
address="127.0.0.1:$port"
[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
CONF
  (cd "$dir" && exec Burrow --config-dir "$dir") >"$dir/burrow.log" 2>&1 </dev/null &
  echo $! >"$dir/burrow.pid"
  for _ in $(seq 1 100); do
    if curl -fsS "http://127.0.0.1:$port/burrow/admin" >/dev/null 2>&1; then
      echo "http://127.0.0.1:$port"
      return
    fi
    sleep 0.2
  done
  echo "Burrow did not answer; see $dir/burrow.log" >&2
  tail -5 "$dir/burrow.log" >&2
  exit 1
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop)
    stop_pid "$dir/burrow.pid"
    stop_pid "$dir/zookeeper.pid"
    ;;
  status) curl -fsS "http://127.0.0.1:$port/v3/kafka/local/consumer/${2:?usage: $0 status GROUP}/status" ;;
  *)
    echo "usage: $0 start BOOTSTRAP | stop | status GROUP" >&2
    exit 2
    ;;
esac
