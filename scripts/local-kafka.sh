#!/usr/bin/env bash
# A real single-node Apache Kafka (KRaft, broker+controller in one JVM) on 127.0.0.1.
#
#   scripts/local-kafka.sh start    start it (idempotent), wait until it answers
#                                   metadata requests, print the bootstrap address
#   scripts/local-kafka.sh stop     stop the broker that this state folder started
#   scripts/local-kafka.sh status   say whether it runs; exit 0 if it answers, else 3
#   scripts/local-kafka.sh wait     wait until the broker this folder started answers
#
# Environment:
#   LOCAL_KAFKA_PORT  client port (default 9092); the controller takes another free port
#   LOCAL_KAFKA_DIR   state folder (default .local/kafka): config, data, log, pid
#   LOCAL_KAFKA_HEAP  JVM heap (default 512m)
#   LOCAL_KAFKA_VERSION  another Apache Kafka release (e.g. 3.9.1, for lag tools too old
#                     for Kafka 4's protocol); read when the folder is new
#
# One node of a cluster (scripts/local-kafka-cluster.sh sets these; read when the folder is
# new, except the controller port, which a node keeps):
#   LOCAL_KAFKA_NODE_ID          this node's id (default 1)
#   LOCAL_KAFKA_CONTROLLER_PORT  this node's controller port (default: a free one)
#   LOCAL_KAFKA_VOTERS           controller.quorum.voters (default: this node alone)
#   LOCAL_KAFKA_CLUSTER_ID       the cluster id formatted into the storage (default: new)
#   LOCAL_KAFKA_REPLICAS         replicas of every topic, internal ones included (default
#                                1); above 1, min.insync.replicas is 2
#   LOCAL_KAFKA_WAIT             0: `start` returns once the JVM runs, without waiting for
#                                it to answer (a cluster's first node cannot answer
#                                before a quorum of controllers runs); `wait` waits
#
# Optional secured listeners (for tests of Kafka security; read when the folder is new):
#   LOCAL_KAFKA_USERS      user:password[,user:password]: SASL PLAIN users and SCRAM-SHA-256/512
#                          credentials (SCRAM ones are written when the storage is formatted)
#   LOCAL_KAFKA_SASL_PORT  a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
#   LOCAL_KAFKA_SSL_PORT   a TLS listener, with LOCAL_KAFKA_SSL_PEM: the server's private key
#                          (PKCS#8) and certificate chain in one PEM file
#   LOCAL_KAFKA_OAUTH_PORT a SASL_PLAINTEXT listener named OAUTH with OAUTHBEARER only, tokens
#                          checked against LOCAL_KAFKA_OAUTH_JWKS_URL (fetched when the
#                          listener starts: the issuer must answer by then) by Kafka's
#                          BrokerJwtValidator, which checks the signature (4.1.0-4.1.1's
#                          default validator checks none); LOCAL_KAFKA_OAUTH_AUDIENCE and
#                          LOCAL_KAFKA_OAUTH_ISSUER (optional) are required of every token
#   LOCAL_KAFKA_ACLS       1: Kafka's StandardAuthorizer on; the PLAINTEXT and controller
#                          listeners' principal (User:ANONYMOUS) is a super user, every
#                          SASL user needs ACLs (scripts/java/KafkaAcls.java adds them)
#
# A listener off loopback (read when the folder is new):
#   LOCAL_KAFKA_EXTERNAL   host:port, an address of this machine: one more PLAINTEXT listener,
#                          named EXTERNAL, bound and advertised there, for clients that
#                          cannot reach 127.0.0.1 (a pod, through its network's gateway)
#
# Jars come from Maven Central on first use (scripts/fetch-jars.sh kafka) and are cached.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
port=${LOCAL_KAFKA_PORT:-9092}
dir=${LOCAL_KAFKA_DIR:-$root/.local/kafka}
case "$dir" in /*) ;; *) dir="$root/$dir" ;; esac
heap=${LOCAL_KAFKA_HEAP:-512m}
bootstrap="127.0.0.1:$port"
config="$dir/server.properties"
pidfile="$dir/kafka.pid"
logfile="$dir/kafka.log"
probe=(python3 "$root/scripts/kafka_metadata.py" "$bootstrap")

# The pid in our pid file, if that process is alive and is the broker of this folder.
our_pid() {
  [ -f "$pidfile" ] || return 1
  local pid
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$config" || return 1
  echo "$pid"
}

# Like Kafka's Uuid.randomUuid: never starting with "-", which argument parsers take for an
# option (about one id in 64 would).
new_cluster_id() {
  python3 -c '
import base64, uuid
while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
    pass
print(cid)'
}

free_port() {
  python3 "$root/scripts/free_port.py"
}

port_in_use() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Kafka binds: TIME_WAIT is free
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)
PY
}

write_config() {
  local controller_port=$1
  local listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port"
  local advertised="PLAINTEXT://127.0.0.1:$port"
  local protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [ -n "${LOCAL_KAFKA_SASL_PORT:-}" ]; then
    listeners+=",SASL_PLAINTEXT://127.0.0.1:$LOCAL_KAFKA_SASL_PORT"
    advertised+=",SASL_PLAINTEXT://127.0.0.1:$LOCAL_KAFKA_SASL_PORT"
    protocols+=",SASL_PLAINTEXT:SASL_PLAINTEXT"
  fi
  if [ -n "${LOCAL_KAFKA_OAUTH_PORT:-}" ]; then
    listeners+=",OAUTH://127.0.0.1:$LOCAL_KAFKA_OAUTH_PORT"
    advertised+=",OAUTH://127.0.0.1:$LOCAL_KAFKA_OAUTH_PORT"
    protocols+=",OAUTH:SASL_PLAINTEXT"
  fi
  if [ -n "${LOCAL_KAFKA_SSL_PORT:-}" ]; then
    listeners+=",SSL://127.0.0.1:$LOCAL_KAFKA_SSL_PORT"
    advertised+=",SSL://127.0.0.1:$LOCAL_KAFKA_SSL_PORT"
    protocols+=",SSL:SSL"
  fi
  if [ -n "${LOCAL_KAFKA_EXTERNAL:-}" ]; then
    listeners+=",EXTERNAL://$LOCAL_KAFKA_EXTERNAL"
    advertised+=",EXTERNAL://$LOCAL_KAFKA_EXTERNAL"
    protocols+=",EXTERNAL:PLAINTEXT"
  fi
  local node_id=${LOCAL_KAFKA_NODE_ID:-1} replicas=${LOCAL_KAFKA_REPLICAS:-1}
  local voters=${LOCAL_KAFKA_VOTERS:-$node_id@127.0.0.1:$controller_port}
  local min_isr=1 offsets_partitions=1
  # Several replicas: acks=all waits for 2 of them, as production sets it; the groups'
  # coordinators are spread over the nodes (the partitions of __consumer_offsets).
  [ "$replicas" -gt 1 ] && { min_isr=2; offsets_partitions=12; }
  cat >"$config" <<CONF
# Written by scripts/local-kafka.sh: a KRaft node (broker and controller in one JVM) for
# local runs and tests; alone, or one of a cluster (scripts/local-kafka-cluster.sh).
process.roles=broker,controller
node.id=$node_id
controller.quorum.voters=$voters
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
# Alone, every topic has one replica; tests want internal topics small and fast.
default.replication.factor=$replicas
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$replicas
offsets.topic.num.partitions=$offsets_partitions
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
log.segment.bytes=16777216
# Retention is enforced within a second (Kafka: every 5 min): tests of data lost by
# retention (tests/e2e/test_lag_in_time.py) wait for it.
log.retention.check.interval.ms=1000
CONF
  if [ -n "${LOCAL_KAFKA_SASL_PORT:-}" ]; then
    local plain_users="" pair
    for pair in ${LOCAL_KAFKA_USERS:+${LOCAL_KAFKA_USERS//,/ }}; do
      plain_users+=" user_${pair%%:*}=\"${pair#*:}\""
    done
    cat >>"$config" <<CONF
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$plain_users;
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
CONF
  fi
  if [ -n "${LOCAL_KAFKA_OAUTH_PORT:-}" ]; then
    cat >>"$config" <<CONF
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=${LOCAL_KAFKA_OAUTH_JWKS_URL:?LOCAL_KAFKA_OAUTH_JWKS_URL is needed with LOCAL_KAFKA_OAUTH_PORT}
sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator
CONF
    [ -z "${LOCAL_KAFKA_OAUTH_AUDIENCE:-}" ] \
      || echo "sasl.oauthbearer.expected.audience=$LOCAL_KAFKA_OAUTH_AUDIENCE" >>"$config"
    [ -z "${LOCAL_KAFKA_OAUTH_ISSUER:-}" ] \
      || echo "sasl.oauthbearer.expected.issuer=$LOCAL_KAFKA_OAUTH_ISSUER" >>"$config"
  fi
  if [ "${LOCAL_KAFKA_ACLS:-0}" = 1 ]; then
    cat >>"$config" <<CONF
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=false
CONF
  fi
  if [ -n "${LOCAL_KAFKA_SSL_PORT:-}" ]; then
    cat >>"$config" <<CONF
ssl.keystore.type=PEM
ssl.keystore.location=${LOCAL_KAFKA_SSL_PEM:?LOCAL_KAFKA_SSL_PEM names the key and certificate}
ssl.client.auth=none
CONF
  fi
}

scram_format_args() {
  local pair mechanism
  for pair in ${LOCAL_KAFKA_USERS:+${LOCAL_KAFKA_USERS//,/ }}; do
    for mechanism in SCRAM-SHA-256 SCRAM-SHA-512; do
      printf '%s\n' --add-scram "$mechanism=[name=${pair%%:*},password=${pair#*:}]"
    done
  done
}

start() {
  mkdir -p "$dir"
  if pid=$(our_pid); then
    [ "${LOCAL_KAFKA_WAIT:-1}" = 0 ] || wait_ready "$pid"
    echo "$bootstrap"
    return
  fi
  if port_in_use "$port"; then
    if "${probe[@]}" >/dev/null 2>&1; then
      echo "a Kafka broker that this folder did not start already answers on $bootstrap" >&2
    else
      echo "port $port is in use by another program; set LOCAL_KAFKA_PORT" >&2
    fi
    exit 1
  fi
  local jars
  jars=$("$root/scripts/fetch-jars.sh" kafka ${LOCAL_KAFKA_VERSION:+"$LOCAL_KAFKA_VERSION"})
  # Keep the controller port across restarts while it is free; otherwise take a new one.
  local controller_port=${LOCAL_KAFKA_CONTROLLER_PORT:-}
  [ -z "$controller_port" ] && [ -f "$dir/controller.port" ] \
    && controller_port=$(cat "$dir/controller.port")
  if [ -n "${LOCAL_KAFKA_CONTROLLER_PORT:-}" ]; then
    echo "$controller_port" >"$dir/controller.port"  # the voters name it: it never moves
  elif [ -z "$controller_port" ] || port_in_use "$controller_port"; then
    controller_port=$(free_port)
    echo "$controller_port" >"$dir/controller.port"
  fi
  write_config "$controller_port"
  cat >"$dir/log4j2.properties" <<'CONF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = warn
logger.apache.name = org.apache.kafka
logger.apache.level = warn
CONF
  # No collector named: the JVM's own choice (G1 on 2 cores and 2 GB or more), or the one
  # JAVA_TOOL_OPTIONS names (the suite's serial collector; naming two fails the start).
  local java_cmd=(java "-Xmx$heap" "-Xms128m" -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$dir/log4j2.properties" -cp "$jars/*")
  # Kafka 4 fetches no OAuth URL it was not allowed to (empty list by default).
  [ -z "${LOCAL_KAFKA_OAUTH_JWKS_URL:-}" ] \
    || java_cmd+=("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=$LOCAL_KAFKA_OAUTH_JWKS_URL")
  if [ ! -f "$dir/data/meta.properties" ]; then
    local cluster_id=${LOCAL_KAFKA_CLUSTER_ID:-}
    [ -n "$cluster_id" ] || cluster_id=$(new_cluster_id)
    local scram=()
    mapfile -t scram < <(scram_format_args)
    "${java_cmd[@]}" kafka.tools.StorageTool format --cluster-id="$cluster_id" -c "$config" "${scram[@]}" \
      >>"$logfile" 2>&1 \
      || { echo "formatting $dir/data failed; see $logfile" >&2; exit 1; }
  fi
  nohup "${java_cmd[@]}" kafka.Kafka "$config" >>"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
  [ "${LOCAL_KAFKA_WAIT:-1}" = 0 ] || wait_ready "$!"
  echo "$bootstrap"
}

wait_ready() {
  local pid=$1 deadline=$((SECONDS + ${LOCAL_KAFKA_START_TIMEOUT:-90}))
  until "${probe[@]}" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the broker exited while starting; last lines of $logfile:" >&2
      tail -n 20 "$logfile" >&2
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "the broker did not answer metadata requests on $bootstrap in time; see $logfile" >&2
      exit 1
    fi
    sleep 0.3
  done
}

stop() {
  local pid
  if ! pid=$(our_pid); then
    rm -f "$pidfile"
    echo "no broker started from $dir is running"
    return
  fi
  kill "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "broker $pid did not stop in 20 s; killing it" >&2
    kill -9 "$pid"
  fi
  rm -f "$pidfile"
  echo "stopped broker $pid ($bootstrap)"
}

status() {
  if pid=$(our_pid) && "${probe[@]}" >/dev/null 2>&1; then
    echo "running: pid $pid, $bootstrap, state in $dir"
  elif pid=$(our_pid); then
    echo "starting or unhealthy: pid $pid, $bootstrap does not answer"
    exit 3
  else
    echo "not running ($dir)"
    exit 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  cluster-id) new_cluster_id ;;  # for local-kafka-cluster.sh: one id for all its nodes
  wait)
    pid=$(our_pid) || { echo "no broker started from $dir is running" >&2; exit 1; }
    wait_ready "$pid"
    ;;
  *) echo "usage: $0 start|stop|status|wait" >&2; exit 2 ;;
esac
