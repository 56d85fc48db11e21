# shellcheck shell=bash
# Shared by scripts/test and scripts/cluster (source it): finds PostgreSQL's server
# binaries and starts a server on 127.0.0.1 when none answers.
#
#   port=$(ensure_postgres)   # prints the port of a server that answers on 127.0.0.1
#
# Order: a server already answering on 127.0.0.1:5432; the machine's own cluster
# (pg_ctlcluster, Debian); a private cluster under target/test-pg on port 55432. As root
# with no binaries at all, the postgresql package is installed with apt. When
# POSTGRES_STARTED_NOTE names a file, the command that stops a server started here is
# written to it (nothing is written when the server was already running).

pg_find_bindir() {
  if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then echo "$PG_BINDIR"; return; fi
  local dir
  dir=$(pg_config --bindir 2>/dev/null || true)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return; fi
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return; fi
}

pg_answers() { "$1/pg_isready" -q -h 127.0.0.1 -p "$2" 2>/dev/null; }

pg_note_started() {
  if [ -n "${POSTGRES_STARTED_NOTE:-}" ]; then printf '%s\n' "$1" > "$POSTGRES_STARTED_NOTE"; fi
}

ensure_postgres() {
  local bindir
  bindir=$(pg_find_bindir)
  if [ -z "$bindir" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing PostgreSQL (apt-get install postgresql)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
    bindir=$(pg_find_bindir)
  fi
  if [ -z "$bindir" ]; then
    echo "no PostgreSQL found. Install it (Debian: apt-get install postgresql)," >&2
    echo "set PG_BINDIR to the directory holding initdb, or set DATABASE_URL." >&2
    return 1
  fi
  if pg_answers "$bindir" 5432; then echo 5432; return; fi
  # The machine's own cluster, if it has one.
  if command -v pg_ctlcluster >/dev/null && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
    for _ in $(seq 1 30); do
      if pg_answers "$bindir" 5432; then
        pg_note_started "pg_ctlcluster --skip-systemctl-redirect $version main stop"
        echo 5432
        return
      fi
      sleep 0.5
    done
  fi
  # A private cluster; PostgreSQL refuses to run as root, so it runs as `postgres`/`nobody`.
  local data="$PWD/target/test-pg" port=55432 user=""
  if [ "$(id -u)" = 0 ]; then
    user=$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)
  fi
  pg_run() { if [ -n "$user" ]; then runuser -u "$user" -- "$@"; else "$@"; fi; }
  if pg_answers "$bindir" "$port"; then echo "$port"; return; fi
  mkdir -p "$data"
  if [ -n "$user" ]; then chown "$user" "$data" && chmod 700 "$data"; fi
  if [ ! -f "$data/PG_VERSION" ]; then
    pg_run "$bindir/initdb" -D "$data" -U postgres -A trust --locale=C -E UTF8 >&2
  fi
  pg_run "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c max_connections=300 -k $data" start >&2
  pg_note_started "${user:+runuser -u $user -- }$bindir/pg_ctl -D $data -m fast -w stop"
  echo "$port"
}
