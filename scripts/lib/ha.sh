# shellcheck shell=bash
# The highly available database of `scripts/cluster up --ha` (source it from scripts/cluster,
# which defines $state, $repo, say, die, pid_alive, port_in_use, need_command and
# stop_pidfile, and sources scripts/lib/postgres.sh): etcd, two PostgreSQL nodes run by Patroni with deploy/patroni.yml, and
# HAProxy in front of them with deploy/haproxy-postgres.cfg. Ports, relative to the
# cluster's port P: etcd P+50 (peers P+51), node J's PostgreSQL P+60+J and Patroni REST API
# P+70+J, the database front P+80 (leader) and P+81 (standby, else leader).

HA_NODES="1 2"

ha_dir() { echo "$state/ha"; }
ha_pg_port() { echo $((HA_PORT + 60 + $1)); }
ha_rest_port() { echo $((HA_PORT + 70 + $1)); }

# PostgreSQL refuses to run as root: as root, Patroni (and the PostgreSQL it starts) runs as
# `postgres` (or `nobody`).
ha_user() {
  if [ "$(id -u)" = 0 ]; then
    id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody
  fi
}

# HTTP status of GET /PATH on node J's Patroni REST API ("000" when it does not answer).
ha_rest() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 1 \
    "http://127.0.0.1:$(ha_rest_port "$1")/$2" 2>/dev/null || true
}

# The node that leads now (1 or 2), or failure.
ha_leader() {
  local node
  for node in $HA_NODES; do
    if [ "$(ha_rest "$node" primary)" = 200 ]; then echo "$node"; return 0; fi
  done
  return 1
}

ha_settings() {
  [ -f "$state/settings" ] || die "no cluster; run scripts/cluster up --ha first"
  # shellcheck source=/dev/null
  . "$state/settings"
  [ -n "${CLUSTER_HA:-}" ] || die "this cluster was started without --ha"
  HA_PORT=$CLUSTER_PORT
}

ha_node_index() {
  [[ ${1:-} =~ ^[12]$ ]] || die "name a database node: 1 or 2"
}

ha_start_node() {
  local node=$1 dir pidfile log bindir
  dir=$(ha_dir)
  pidfile="$dir/patroni-$node.pid"
  log="$dir/patroni-$node.log"
  pid_alive "$pidfile" && die "database node $node is already running (pid $(cat "$pidfile"))"
  bindir=$(pg_find_bindir)
  [ -n "$bindir" ] || die "no PostgreSQL server binaries (apt-get install postgresql)"
  mkdir -p "$dir/pg$node"
  chmod 700 "$dir/pg$node"
  # setsid and setpriv exec, so the pid recorded is Patroni's own.
  local user runas=()
  user=$(ha_user)
  if [ -n "$user" ]; then
    chown "$user" "$dir/pg$node"
    runas=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --)
  fi
  PATRONI_NAME="pg$node" \
    PATRONI_SCOPE="statki-$HA_PORT" \
    PATRONI_RESTAPI_USERNAME=statki \
    PATRONI_RESTAPI_PASSWORD="$(ha_secret restapi)" \
    PATRONI_ETCD3_USERNAME=root \
    PATRONI_ETCD3_PASSWORD="$(ha_secret etcd)" \
    PATRONI_SUPERUSER_PASSWORD="$(ha_secret postgres)" \
    PATRONI_REWIND_PASSWORD="$(ha_secret postgres)" \
    PATRONI_REPLICATION_PASSWORD="$(ha_secret replicator)" \
    PATRONI_RESTAPI_LISTEN="127.0.0.1:$(ha_rest_port "$node")" \
    PATRONI_RESTAPI_CONNECT_ADDRESS="127.0.0.1:$(ha_rest_port "$node")" \
    PATRONI_POSTGRESQL_LISTEN="127.0.0.1:$(ha_pg_port "$node")" \
    PATRONI_POSTGRESQL_CONNECT_ADDRESS="127.0.0.1:$(ha_pg_port "$node")" \
    PATRONI_POSTGRESQL_DATA_DIR="$dir/pg$node/data" \
    PATRONI_POSTGRESQL_PGPASS="$dir/pg$node/pgpass" \
    PATRONI_POSTGRESQL_BIN_DIR="$bindir" \
    PATRONI_ETCD3_HOSTS="127.0.0.1:$((HA_PORT + 50))" \
    setsid "${runas[@]}" patroni "$repo/deploy/patroni.yml" >>"$log" 2>&1 </dev/null &
  echo $! > "$pidfile"
  say "database node $node starting (Patroni pid $(cat "$pidfile"), log $log)"
}

# SIGKILL node J's Patroni, its PostgreSQL and every PostgreSQL process under it: the
# machine is gone.
ha_kill_node() {
  local node=$1 dir postmaster="" children=""
  dir=$(ha_dir)
  if [ -s "$dir/pg$node/data/postmaster.pid" ]; then
    postmaster=$(head -n 1 "$dir/pg$node/data/postmaster.pid")
    kill -0 "$postmaster" 2>/dev/null || postmaster=""
  fi
  [ -z "$postmaster" ] || children=$(pgrep -P "$postmaster" | tr '\n' ' ' || true)
  if pid_alive "$dir/patroni-$node.pid"; then
    # shellcheck disable=SC2046
    kill -KILL $(cat "$dir/patroni-$node.pid") $postmaster $children 2>/dev/null || true
  elif [ -n "$postmaster" ]; then
    # shellcheck disable=SC2086
    kill -KILL $postmaster $children 2>/dev/null || true
  else
    die "database node $node is not running"
  fi
  rm -f "$dir/patroni-$node.pid"
  say "database node $node killed (Patroni and PostgreSQL, SIGKILL)"
}

# The password of one part of the control plane (`restapi`: Patroni's unsafe REST
# endpoints; `etcd`: its root user; `postgres` and `replicator`: the database's superuser
# and replication role), generated once per `up` and kept in the ha dir (0600).
ha_secret() {
  local file
  file="$(ha_dir)/$1.password"
  [ -s "$file" ] || (umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' > "$file")
  cat "$file"
}

ha_up() {
  HA_PORT=$1
  need_command patroni patroni
  need_command etcd etcd-server
  need_command etcdctl etcd-client
  need_command setpriv util-linux
  if [ -z "$(pg_find_bindir)" ] && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
  fi
  local dir port
  dir=$(ha_dir)
  rm -rf "$dir"
  mkdir -p "$dir"
  chmod 755 "$dir"
  for port in $((HA_PORT + 50)) $((HA_PORT + 51)) $((HA_PORT + 61)) $((HA_PORT + 62)) \
    $((HA_PORT + 71)) $((HA_PORT + 72)) $((HA_PORT + 80)) $((HA_PORT + 81)); do
    port_in_use "$port" && die "port $port (the database) is taken"
  done

  local etcd_url="http://127.0.0.1:$((HA_PORT + 50))" peer_url="http://127.0.0.1:$((HA_PORT + 51))"
  setsid etcd --name statki \
    --data-dir "$dir/etcd" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "$peer_url" --initial-advertise-peer-urls "$peer_url" \
    --initial-cluster "statki=$peer_url" --initial-cluster-state new \
    >>"$dir/etcd.log" 2>&1 </dev/null &
  echo $! > "$dir/etcd.pid"
  local ok=""
  for _ in $(seq 1 100); do
    if ETCDCTL_API=3 etcdctl --endpoints "$etcd_url" endpoint health >/dev/null 2>&1; then ok=1; break; fi
    pid_alive "$dir/etcd.pid" || break
    sleep 0.1
  done
  [ -n "$ok" ] || { tail -n 20 "$dir/etcd.log" >&2 || true; die "etcd did not start; log: $dir/etcd.log"; }
  # Only with the root user's password may anything read or write Patroni's keys.
  ETCDCTL_API=3 etcdctl --endpoints "$etcd_url" user add "root:$(ha_secret etcd)" >/dev/null \
    || die "could not create etcd's root user"
  ETCDCTL_API=3 etcdctl --endpoints "$etcd_url" auth enable >/dev/null \
    || die "could not turn etcd's authentication on"
  say "etcd on $etcd_url (authentication on)"

  # Node 1 first, so it bootstraps (initdb) and node 2 copies it.
  ha_start_node 1
  ha_wait "leader" 600 || { tail -n 30 "$dir/patroni-1.log" >&2 || true; die "no leader within 60 s"; }
  ha_start_node 2
  ha_wait "sync" 1200 || { tail -n 30 "$dir/patroni-2.log" >&2 || true; die "no synchronous standby within 120 s"; }
  say "database node $(ha_leader) leads; the other is its synchronous standby"

  {
    echo "# Written by scripts/cluster: the database nodes of this cluster."
    local backend node
    for backend in primary standby; do
      echo "backend postgres_$backend from postgres-$backend"
      for node in $HA_NODES; do
        echo "    server pg$node 127.0.0.1:$(ha_pg_port "$node") check port $(ha_rest_port "$node")"
      done
    done
  } > "$dir/haproxy-postgres-servers.cfg"
  haproxy -c -q -f "$repo/deploy/haproxy-postgres.cfg" -f "$dir/haproxy-postgres-servers.cfg" >&2 \
    || die "HAProxy refused the database configuration"
  STATKI_DB_PRIMARY_BIND="127.0.0.1:$((HA_PORT + 80))" STATKI_DB_STANDBY_BIND="127.0.0.1:$((HA_PORT + 81))" \
    setsid haproxy -db -f "$repo/deploy/haproxy-postgres.cfg" -f "$dir/haproxy-postgres-servers.cfg" \
    >>"$dir/haproxy-postgres.log" 2>&1 </dev/null &
  echo $! > "$dir/haproxy-postgres.pid"
  local bindir
  bindir=$(pg_find_bindir)
  ok=""
  for _ in $(seq 1 100); do
    if pg_answers "$bindir" $((HA_PORT + 80)) && pg_answers "$bindir" $((HA_PORT + 81)); then ok=1; break; fi
    pid_alive "$dir/haproxy-postgres.pid" || break
    sleep 0.1
  done
  [ -n "$ok" ] || { tail -n 20 "$dir/haproxy-postgres.log" >&2 || true; die "the database front does not answer"; }
  ha_wait_routed "$bindir"
  say "database front: leader on 127.0.0.1:$((HA_PORT + 80)), standby on 127.0.0.1:$((HA_PORT + 81))"
}

# HAProxy counts every server up until its first check, so a front that answers may still
# hand the leader's port to the standby (a replica starting then fails to create its
# database or migrate: read-only). Waits until the first checks have taken the standby out
# of the leader's front and the leader out of the standby's (HAProxy logs each "is DOWN"),
# then asks each front which server it reached.
ha_wait_routed() {
  local bindir=$1 dir leader standby node log routed="" primary="" replica=""
  dir=$(ha_dir)
  log="$dir/haproxy-postgres.log"
  leader=$(ha_leader) || die "no node leads"
  for node in $HA_NODES; do [ "$node" = "$leader" ] || standby=$node; done
  for _ in $(seq 1 300); do
    if grep -q "Server postgres_primary/pg$standby is DOWN" "$log" \
      && grep -q "Server postgres_standby/pg$leader is DOWN" "$log"; then
      routed=1
      break
    fi
    pid_alive "$dir/haproxy-postgres.pid" || break
    sleep 0.1
  done
  if [ -n "$routed" ]; then
    primary=$(ha_in_recovery "$bindir" $((HA_PORT + 80)))
    replica=$(ha_in_recovery "$bindir" $((HA_PORT + 81)))
  fi
  if [ "$primary" != f ] || [ "$replica" != t ]; then
    tail -n 20 "$log" >&2 || true
    die "the database front does not route to node $leader (leader) and node $standby (standby) within 30 s (leader front in recovery: '${primary}', standby front: '${replica}'); log: $log"
  fi
}

# pg_is_in_recovery() of the server behind PORT: t (a standby), f (the leader), or nothing.
ha_in_recovery() {
  PGPASSWORD="$(ha_secret postgres)" "$1/psql" -XAtq -h 127.0.0.1 -p "$2" -U postgres -d postgres \
    -c 'SELECT pg_is_in_recovery()' 2>/dev/null || true
}

# Waits (up to N tenths of a second) until a node leads ("leader"), or until a node is the
# leader's synchronous standby ("sync").
ha_wait() {
  local what=$1 tries=$2 node
  for _ in $(seq 1 "$tries"); do
    case $what in
      leader) ha_leader >/dev/null && return 0 ;;
      sync)
        for node in $HA_NODES; do
          [ "$(ha_rest "$node" sync)" = 200 ] && return 0
        done
        ;;
    esac
    sleep 0.1
  done
  return 1
}

ha_down() {
  local dir node postmaster
  dir=$(ha_dir)
  [ -d "$dir" ] || return 0
  stop_pidfile "$dir/haproxy-postgres.pid"
  for node in $HA_NODES; do
    stop_pidfile "$dir/patroni-$node.pid"
    # A PostgreSQL left behind by a killed Patroni.
    if [ -s "$dir/pg$node/data/postmaster.pid" ]; then
      postmaster=$(head -n 1 "$dir/pg$node/data/postmaster.pid")
      if kill -0 "$postmaster" 2>/dev/null; then
        kill -QUIT "$postmaster" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$postmaster" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$postmaster" 2>/dev/null || true
      fi
    fi
  done
  stop_pidfile "$dir/etcd.pid"
}

ha_status() {
  HA_PORT=$CLUSTER_PORT
  local node role
  echo "database  leader front 127.0.0.1:$((HA_PORT + 80))  standby front 127.0.0.1:$((HA_PORT + 81))"
  for node in $HA_NODES; do
    if [ "$(ha_rest "$node" primary)" = 200 ]; then
      role="leader"
    elif [ "$(ha_rest "$node" sync)" = 200 ]; then
      role="synchronous standby"
    elif [ "$(ha_rest "$node" replica)" = 200 ]; then
      role="standby (asynchronous)"
    elif [ "$(ha_rest "$node" health)" = 000 ]; then
      role="down"
    else
      role="starting or not replicating"
    fi
    echo "db node $node  postgres 127.0.0.1:$(ha_pg_port "$node")  patroni http://127.0.0.1:$(ha_rest_port "$node")  $role"
  done
}
