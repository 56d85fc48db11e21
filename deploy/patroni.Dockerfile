# A PostgreSQL 15 node run by Patroni, for docker-compose.yml's `ha` profile. Its
# configuration is deploy/patroni.yml (mounted), the same file `scripts/cluster up --ha` uses.
FROM postgres:15-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends patroni curl \
 && rm -rf /var/lib/apt/lists/*
ENV PATRONI_POSTGRESQL_BIN_DIR=/usr/lib/postgresql/15/bin \
    PATRONI_POSTGRESQL_DATA_DIR=/var/lib/postgresql/data/patroni \
    PATRONI_POSTGRESQL_PGPASS=/tmp/pgpass
USER postgres
EXPOSE 5432 8008
HEALTHCHECK --interval=5s --timeout=3s --retries=5 CMD curl -fsS http://127.0.0.1:8008/health || exit 1
ENTRYPOINT ["patroni", "/etc/patroni.yml"]
