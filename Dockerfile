# Build and run Statki. The service needs only a PostgreSQL URL (DATABASE_URL) at run time.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY src ./src
COPY migrations ./migrations
COPY benches ./benches
RUN cargo build --release --locked --bin statki

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 statki
COPY --from=build /src/target/release/statki /usr/local/bin/statki
USER statki
ENV STATKI_LISTEN=0.0.0.0:8080 \
    STATKI_LOG_FORMAT=json
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD curl -fsS http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["/usr/local/bin/statki"]
