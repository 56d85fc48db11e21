# Sourced by checks: installs clients/typescript's npm packages exactly as locked
# (`npm ci`), once per package-lock.json, installing Node.js with apt when it is missing.

npm_client_install() {
  local dir=clients/typescript
  if ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >&2
    else
      echo "Node.js and npm are needed (Debian: apt-get install nodejs npm)" >&2
      return 1
    fi
  fi
  local stamp="$dir/node_modules/.installed-lock"
  if ! cmp -s "$dir/package-lock.json" "$stamp" 2>/dev/null; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$stamp"
  fi
}
