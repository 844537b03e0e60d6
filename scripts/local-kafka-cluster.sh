#!/usr/bin/env bash
# A real Apache Kafka cluster of several KRaft nodes on 127.0.0.1 (each node broker and
# controller, as scripts/local-kafka.sh runs one), as production runs Kafka: every topic,
# __consumer_offsets included, has 3 replicas (at most one a node) and min.insync.replicas
# 2, and the groups' coordinators are spread over the nodes.
#
#   scripts/local-kafka-cluster.sh start        start every node (idempotent), wait until
#                                               each answers; print the bootstrap list
#   scripts/local-kafka-cluster.sh stop         stop every node (SIGTERM, all at once)
#   scripts/local-kafka-cluster.sh start-node N start node N (1..) again, wait until it answers
#   scripts/local-kafka-cluster.sh stop-node N  stop node N as a rolling restart does (SIGTERM)
#   scripts/local-kafka-cluster.sh kill-node N  kill node N as a crash does (SIGKILL)
#   scripts/local-kafka-cluster.sh status       each node: running or not; exit 0 if all answer
#   scripts/local-kafka-cluster.sh bootstrap    print the bootstrap list
#
# Environment:
#   LOCAL_KAFKA_CLUSTER_DIR    state folder (default .local/kafka-cluster): node-N/ each
#   LOCAL_KAFKA_CLUSTER_NODES  how many nodes (default 3); read when the folder is new
#   LOCAL_KAFKA_CLUSTER_HEAP   each node's JVM heap (default 400m)
#   LOCAL_KAFKA_VERSION        as for local-kafka.sh; read when the folder is new
#
# Ports (each node's client and controller port) are chosen free when the folder is new and
# kept in it: the controllers name each other by them, so they never move.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${LOCAL_KAFKA_CLUSTER_DIR:-$root/.local/kafka-cluster}
case "$dir" in /*) ;; *) dir="$root/$dir" ;; esac
node_script=$root/scripts/local-kafka.sh

# The folder's layout, written once: nodes, cluster id, ports, version.
layout() {
  mkdir -p "$dir"
  if [ ! -f "$dir/cluster.env" ]; then
    local nodes=${LOCAL_KAFKA_CLUSTER_NODES:-3} n voters="" cluster_id
    [ "$nodes" -ge 1 ] 2>/dev/null || { echo "LOCAL_KAFKA_CLUSTER_NODES must be a number >= 1" >&2; exit 2; }
    cluster_id=$("$node_script" cluster-id)
    {
      echo "NODES=$nodes"
      echo "CLUSTER_ID=$cluster_id"
      echo "VERSION=${LOCAL_KAFKA_VERSION:-}"
      for n in $(seq 1 "$nodes"); do
        local client controller
        client=$(python3 "$root/scripts/free_port.py")
        controller=$(python3 "$root/scripts/free_port.py")
        echo "PORT_$n=$client"
        echo "CONTROLLER_PORT_$n=$controller"
        voters+="${voters:+,}$n@127.0.0.1:$controller"
      done
      echo "VOTERS=$voters"
    } >"$dir/cluster.env.partial"
    mv "$dir/cluster.env.partial" "$dir/cluster.env"
  fi
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
}

node() {  # node N COMMAND [LOCAL_KAFKA_WAIT]: local-kafka.sh COMMAND for node N
  local n=$1 command=$2 wait=${3:-1} port_var=PORT_$1 controller_var=CONTROLLER_PORT_$1
  [ -n "${!port_var:-}" ] || { echo "no node $n: the cluster has nodes 1..$NODES" >&2; exit 2; }
  LOCAL_KAFKA_DIR="$dir/node-$n" LOCAL_KAFKA_PORT=${!port_var} \
    LOCAL_KAFKA_NODE_ID=$n LOCAL_KAFKA_CONTROLLER_PORT=${!controller_var} \
    LOCAL_KAFKA_VOTERS=$VOTERS LOCAL_KAFKA_CLUSTER_ID=$CLUSTER_ID \
    LOCAL_KAFKA_REPLICAS=$((NODES < 3 ? NODES : 3)) LOCAL_KAFKA_WAIT=$wait \
    LOCAL_KAFKA_HEAP=${LOCAL_KAFKA_CLUSTER_HEAP:-400m} \
    LOCAL_KAFKA_VERSION=$VERSION "$node_script" "$command"
}

bootstrap() {
  local n list=""
  for n in $(seq 1 "$NODES"); do
    local port_var=PORT_$n
    list+="${list:+,}127.0.0.1:${!port_var}"
  done
  echo "$list"
}

layout
case "${1:-}" in
  start)
    # Every node's JVM first (none answers before a quorum of controllers runs), then wait.
    for n in $(seq 1 "$NODES"); do node "$n" start 0 >/dev/null; done
    for n in $(seq 1 "$NODES"); do node "$n" wait; done
    bootstrap
    ;;
  stop)
    # All at once: a node stopped last, alone, has no quorum to shut down under and hangs.
    for n in $(seq 1 "$NODES"); do node "$n" stop & done
    wait
    ;;
  start-node) node "${2:?start-node N}" start >/dev/null; echo "node $2 answers" ;;
  stop-node) node "${2:?stop-node N}" stop ;;
  kill-node)
    n=${2:?kill-node N}
    pidfile="$dir/node-$n/kafka.pid"
    if [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null; then
      rm -f "$pidfile"
      echo "killed node $n"
    else
      echo "node $n was not running"
    fi
    ;;
  status)
    failed=0
    for n in $(seq 1 "$NODES"); do
      printf 'node %s: ' "$n"
      node "$n" status || failed=3
    done
    exit "$failed"
    ;;
  bootstrap) bootstrap ;;
  *) echo "usage: $0 start|stop|start-node N|stop-node N|kill-node N|status|bootstrap" >&2; exit 2 ;;
esac
