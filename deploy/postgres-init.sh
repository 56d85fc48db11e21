#!/bin/sh
# Run once by the postgres image on an empty data directory (docker-entrypoint-initdb.d):
# the Statki database gets an owner that is not a superuser. The service connects as that
# owner, runs the migrations, and then works as `statki_app` (migration 0024), which owns
# nothing and may only append to the event log. The superuser (POSTGRES_USER) stays for
# administrators. See docs/security.md.
set -eu
psql -v ON_ERROR_STOP=1 -v owner_password="$STATKI_OWNER_PASSWORD" \
    --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
CREATE ROLE statki_owner LOGIN CREATEROLE PASSWORD :'owner_password';
ALTER DATABASE statki OWNER TO statki_owner;
ALTER SCHEMA public OWNER TO statki_owner;
SQL
