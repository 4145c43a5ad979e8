#!/usr/bin/env bash
# A real 3-node Apache Iggy cluster on 127.0.0.1 (build it first with
# tests/real-cluster/build.sh). Run from the project root:
#   cluster.sh start N     start node N (0..2), wait for its client port
#   cluster.sh kill N      SIGKILL node N          cluster.sh stop N   SIGTERM, then SIGKILL
#   cluster.sh pause N     SIGSTOP node N          cluster.sh resume N SIGCONT node N
#   cluster.sh stopall     stop every node started here
#   cluster.sh status      which nodes are up       cluster.sh seeds   the client addresses
#   cluster.sh refusals    per node, how many sends it refused as a backup (from its log)
#   cluster.sh env         the environment every node gets
#   cluster.sh --release ...   the same, with the release build (build.sh --release)
# Node i: client TCP 127.0.0.1:2809i, replica TCP 127.0.0.1:2909i, user iggy / password iggy.
# State in $IGGYREAL_DIR (default target/iggy-real under the current directory): data/, logs/
# and pids/ for the debug build, release/data, release/logs and release/pids for the release
# build, so the two never share a node's state. Both use the same ports: run one at a time.
# See docs/real-cluster.md.
set -u
W=${IGGYREAL_DIR:-$PWD/target/iggy-real}
PROFILE=debug
STATE=$W
if [ "${1:-}" = "--release" ]; then
  PROFILE=release
  STATE=$W/release
  shift
fi
BIN=${IGGY_SERVER_BIN_PATH:-$W/target/$PROFILE/iggy-server}
SRC=$W/src
PIDS=$STATE/pids
LOGS=$STATE/logs
DATA=$STATE/data
mkdir -p "$PIDS" "$LOGS" "$DATA"

tcp_port() { echo $((28090 + $1)); }
replica_port() { echo $((29090 + $1)); }

cluster_env() {
  echo IGGY_CONFIG_PATH=$SRC/core/server/config.toml
  echo IGGY_CLUSTER_ENABLED=true
  echo IGGY_CLUSTER_NAME=iggy-route-test
  echo IGGY_MESSAGE_BUS_RECONNECT_PERIOD=100ms
  echo IGGY_QUIC_ENABLED=false
  echo IGGY_HTTP_ENABLED=false
  echo IGGY_WEBSOCKET_ENABLED=false
  echo IGGY_ROOT_USERNAME=iggy
  echo IGGY_ROOT_PASSWORD=iggy
  echo IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=all
  echo IGGY_SHARD_RUNTIME_CAPACITY=256
  for i in 0 1 2; do
    echo IGGY_CLUSTER_NODES_${i}_NAME=node-$i
    echo IGGY_CLUSTER_NODES_${i}_IP=127.0.0.1
    echo IGGY_CLUSTER_NODES_${i}_REPLICA_ID=$i
    echo IGGY_CLUSTER_NODES_${i}_PORTS_TCP=$(tcp_port $i)
    echo IGGY_CLUSTER_NODES_${i}_PORTS_TCP_REPLICA=$(replica_port $i)
  done
}

start() {
  local n=$1
  if [ -f "$PIDS/node$n.pid" ] && kill -0 "$(cat "$PIDS/node$n.pid")" 2>/dev/null; then
    echo "node$n already running"; return 0
  fi
  [ -x "$BIN" ] || { echo "no server binary at $BIN: run tests/real-cluster/build.sh first"; return 1; }
  mkdir -p "$DATA/node$n"
  (
    cd "$SRC" || exit 1
    env $(cluster_env) IGGY_SYSTEM_PATH="$DATA/node$n" IGGY_TCP_ADDRESS=127.0.0.1:$(tcp_port $n) \
      "$BIN" --replica-id "$n" >>"$LOGS/node$n.log" 2>&1 &
    echo $! >"$PIDS/node$n.pid"
  )
  for _ in $(seq 1 600); do
    if (exec 3<>/dev/tcp/127.0.0.1/$(tcp_port $n)) 2>/dev/null; then
      echo "node$n up on 127.0.0.1:$(tcp_port $n)"; return 0
    fi
    kill -0 "$(cat "$PIDS/node$n.pid")" 2>/dev/null || { echo "node$n exited:"; tail -20 "$LOGS/node$n.log"; return 1; }
    sleep 0.5
  done
  echo "node$n did not open its port in 300 s"; return 1
}

signal() {
  local sig=$1 n=$2 pid
  pid=$(cat "$PIDS/node$n.pid" 2>/dev/null) || { echo "node$n not started here"; return 0; }
  kill -"$sig" "$pid" 2>/dev/null || true
  # A paused node acts on SIGTERM only once it runs again (SIGKILL needs no help).
  kill -CONT "$pid" 2>/dev/null || true
  for _ in $(seq 1 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$PIDS/node$n.pid"
  echo "node$n stopped ($sig)"
}

# SIGSTOP or SIGCONT to a running node: it keeps its sockets and its state, and a paused
# node accepts connections it does not answer, as a node stuck in a long pause would.
freeze() {
  local sig=$1 n=$2 done=$3 pid
  pid=$(cat "$PIDS/node$n.pid" 2>/dev/null) || { echo "node$n not started here"; return 1; }
  kill -0 "$pid" 2>/dev/null || { echo "node$n not running"; return 1; }
  kill -"$sig" "$pid" || return 1
  echo "node$n $done ($sig)"
}

# Whether process $1 is stopped (state T in /proc).
paused() {
  local pid=$1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = T ]
}

case "${1:-}" in
  start) start "$2" ;;
  kill) signal KILL "$2" ;;
  stop) signal TERM "$2" ;;
  pause) freeze STOP "$2" paused ;;
  # Resuming a node that is not running is no error: a run that makes the cluster whole
  # resumes every node.
  resume) freeze CONT "$2" resumed || true ;;
  stopall) for n in 0 1 2; do [ -f "$PIDS/node$n.pid" ] && signal TERM $n; done; true ;;
  status) for n in 0 1 2; do
            pid=$(cat "$PIDS/node$n.pid" 2>/dev/null)
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
              if paused "$pid"; then echo "node$n paused"; else echo "node$n up"; fi
            else echo "node$n down"; fi; done ;;
  seeds) echo 127.0.0.1:28090,127.0.0.1:28091,127.0.0.1:28092 ;;
  refusals) for n in 0 1 2; do
              printf 'node%s=%s ' $n "$(grep -c 'rejecting client request on non-primary' "$LOGS/node$n.log" 2>/dev/null)"
            done; echo ;;
  env) cluster_env ;;
  *) echo "usage: $0 [--release] start|kill|stop|pause|resume N | stopall | status | seeds | refusals | env"; exit 2 ;;
esac
