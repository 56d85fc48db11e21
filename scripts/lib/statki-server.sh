# Sourced by the checks in scripts/checks/: starts the `statki` binary on a free loopback
# port with a database of its own on $DATABASE_URL's server, and stops both on exit.
# After `start_statki`, STATKI_URL is the server's base URL. Rate limits are off unless
# STATKI_RATE_LIMITS says otherwise: these checks hammer the contract from one address, and
# the limits have tests of their own (tests/it/hardening.rs).

statki_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_statki() {
  if [ -n "${STATKI_PID:-}" ]; then
    kill "$STATKI_PID" 2>/dev/null || true
    wait "$STATKI_PID" 2>/dev/null || true
    STATKI_PID=""
  fi
  if [ -n "${STATKI_DB:-}" ] && command -v psql >/dev/null; then
    psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $STATKI_DB WITH (FORCE)" >/dev/null 2>&1 || true
    STATKI_DB=""
  fi
}

start_statki() {
  : "${DATABASE_URL:?set DATABASE_URL to a PostgreSQL server the check may create a database on}"
  local bin=target/debug/statki
  [ -x "$bin" ] || cargo build --quiet --bin statki
  local port
  port=$(statki_free_port)
  STATKI_DB="statki_check_$(date +%s)_$$"
  local base=${DATABASE_URL%%\?*}
  local query=""
  [ "$base" != "$DATABASE_URL" ] && query="?${DATABASE_URL#*\?}"
  STATKI_LOG=$(mktemp)
  DATABASE_URL="${base%/*}/$STATKI_DB$query" \
    STATKI_LISTEN="127.0.0.1:$port" \
    STATKI_JWT_SECRET="check-secret-$(date +%s%N)" \
    STATKI_RATE_LIMITS="${STATKI_RATE_LIMITS:-false}" \
    RUST_LOG=warn \
    "$bin" >"$STATKI_LOG" 2>&1 &
  STATKI_PID=$!
  trap stop_statki EXIT
  STATKI_URL="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    if curl -sf "$STATKI_URL/readyz" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$STATKI_PID" 2>/dev/null; then break; fi
    sleep 0.2
  done
  echo "statki did not start; its log:" >&2
  cat "$STATKI_LOG" >&2
  return 1
}
