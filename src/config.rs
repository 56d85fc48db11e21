//! Settings from the environment and matching command-line flags. Secrets are never printed.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use std::time::Duration;

use crate::http::MetricsAccess;
use crate::http::limits::{Rate, RateLimitSettings};
use crate::http::server::ConnectionSettings;

#[derive(Clone, Debug, Parser)]
#[command(
    name = "statki",
    version,
    about = "An authoritative HTTP/JSON Battleship service"
)]
pub struct Config {
    /// PostgreSQL URL. When unset, a private cluster is started from the machine's
    /// PostgreSQL binaries with its data in --data-dir.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// PostgreSQL URL for reads that may lag a little (match lists, a player's history, the
    /// ladder, stream catch-up): a streaming standby. Unset or empty: DATABASE_URL.
    #[arg(long, env = "STATKI_READ_DATABASE_URL", hide_env_values = true)]
    pub read_database_url: Option<String>,

    /// Where the embedded PostgreSQL keeps its data (only without DATABASE_URL). Default:
    /// `.statki/pgdata`; as root, when PostgreSQL's user cannot enter the working directory,
    /// `$STATE_DIRECTORY/pgdata` or `/var/lib/statki/pgdata`.
    #[arg(long, env = "STATKI_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// Address to listen on.
    #[arg(long, env = "STATKI_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Token signing secret (HS256). When unset, one is generated once and kept in the
    /// database so restarts and replicas agree.
    #[arg(long, env = "STATKI_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,

    /// Standard placement clock, seconds.
    #[arg(long, env = "STATKI_PLACEMENT_SECONDS", default_value_t = 120)]
    pub placement_seconds: u32,

    /// Standard shot clock, seconds.
    #[arg(long, env = "STATKI_SHOT_SECONDS", default_value_t = 30)]
    pub shot_seconds: u32,

    /// Seconds an unjoined match waits before it is cancelled.
    #[arg(long, env = "STATKI_JOIN_SECONDS", default_value_t = 900)]
    pub join_seconds: u32,

    /// Most unjoined matches (open or challenges) one player may hold (beyond: 409
    /// `too_many_open_matches`).
    #[arg(long, env = "STATKI_OPEN_MATCHES_PER_PLAYER", default_value_t = 5)]
    pub open_matches_per_player: u32,

    /// Origins allowed by CORS, comma-separated (`*` for any). Empty: none.
    #[arg(
        long,
        env = "STATKI_CORS_ORIGINS",
        value_delimiter = ',',
        default_value = "",
        value_parser = cors_origin
    )]
    pub cors_origins: Vec<String>,

    /// Log format.
    #[arg(long, env = "STATKI_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Seconds a request may take before it is answered 408.
    #[arg(long, env = "STATKI_REQUEST_TIMEOUT_SECONDS", default_value_t = 15)]
    pub request_timeout_seconds: u64,

    /// Most open event streams one player may hold across all replicas together (beyond:
    /// 429).
    #[arg(long, env = "STATKI_STREAMS_PER_PLAYER", default_value_t = 8)]
    pub streams_per_player: usize,

    /// Most open event streams on this replica (beyond: 429).
    #[arg(long, env = "STATKI_STREAMS_PER_REPLICA", default_value_t = 20_000)]
    pub streams_per_replica: usize,

    /// Milliseconds a bot pauses before each action (0 plays at once). Joining and placing
    /// wait at most 500 ms, and a bot about to run out of time acts at once.
    #[arg(long, env = "STATKI_BOT_DELAY_MS", default_value_t = 800, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub bot_delay_ms: u64,
    /// Rate limits on (`true`) or off (`false`, for benchmarks only).
    #[arg(long, env = "STATKI_RATE_LIMITS", default_value_t = true, action = clap::ArgAction::Set)]
    pub rate_limits: bool,

    /// Registrations (`POST /v1/players`) per client address per minute, sustained.
    #[arg(long, env = "STATKI_REGISTER_PER_MINUTE", default_value_t = 10)]
    pub register_per_minute: u32,

    /// Registrations one client address may make at once before the rate applies.
    #[arg(long, env = "STATKI_REGISTER_BURST", default_value_t = 5)]
    pub register_burst: u32,

    /// Log-ins (`POST /v1/sessions`) per client address per minute, sustained.
    #[arg(long, env = "STATKI_LOGIN_PER_MINUTE", default_value_t = 10)]
    pub login_per_minute: u32,

    /// Log-ins one client address may make at once before the rate applies.
    #[arg(long, env = "STATKI_LOGIN_BURST", default_value_t = 10)]
    pub login_burst: u32,

    /// Requests per player per second (any request with a valid token), sustained.
    #[arg(long, env = "STATKI_PLAYER_PER_SECOND", default_value_t = 50)]
    pub player_per_second: u32,

    /// Requests one player may make at once before the rate applies.
    #[arg(long, env = "STATKI_PLAYER_BURST", default_value_t = 100)]
    pub player_burst: u32,

    /// Requests per client address per second (every request but the probes), sustained.
    #[arg(long, env = "STATKI_ADDRESS_PER_SECOND", default_value_t = 500)]
    pub address_per_second: u32,

    /// Requests one client address may make at once before the rate applies.
    #[arg(long, env = "STATKI_ADDRESS_BURST", default_value_t = 1000)]
    pub address_burst: u32,

    /// Export bytes one caller may take a second (`GET /v1/matches/{id}/export` and
    /// `GET /v1/players/{id}/matches/export` together), four seconds' worth at once; beyond,
    /// 429 `rate_limited` (a streamed export pauses instead).
    #[arg(long, env = "STATKI_EXPORT_BYTES_PER_SECOND", default_value_t = crate::http::limits::EXPORT_CALLER_BYTES)]
    pub export_bytes_per_second: u32,

    /// Export bytes of one match or one player's matches anyone may take a second, four
    /// seconds' worth at once.
    #[arg(long, env = "STATKI_EXPORT_TARGET_BYTES_PER_SECOND", default_value_t = crate::http::limits::EXPORT_TARGET_BYTES)]
    pub export_target_bytes_per_second: u32,

    /// The header a trusted balancer puts the client address in (e.g. `X-Forwarded-For`;
    /// its last entry is used). Unset: the TCP peer address. Set it only behind a balancer
    /// that overwrites or appends it, or clients choose their own rate-limit bucket.
    #[arg(long, env = "STATKI_TRUSTED_PROXY_HEADER")]
    pub trusted_proxy_header: Option<axum::http::HeaderName>,

    /// The balancers whose proxy header is believed: addresses or networks, comma
    /// separated (e.g. `10.0.0.0/8,::1`). Empty: loopback only. A request from any other
    /// peer is keyed by its TCP address whatever header it sends.
    #[arg(long, env = "STATKI_TRUSTED_PROXIES", value_delimiter = ',', value_parser = crate::http::limits::parse_proxy)]
    pub trusted_proxies: Vec<ipnet::IpNet>,

    /// Serve `/metrics` on this address of its own (e.g. one only the monitoring network
    /// reaches); the API address then answers it 404.
    #[arg(long, env = "STATKI_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Require `Authorization: Bearer <this>` for `/metrics` on the API address.
    #[arg(long, env = "STATKI_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,

    /// Answer `/metrics` on the API address to anyone (for a private network only).
    /// Without it, a metrics listener or a metrics token, the API address answers 404.
    #[arg(long, env = "STATKI_METRICS_OPEN", default_value_t = false, action = clap::ArgAction::Set)]
    pub metrics_open: bool,

    /// Most connections one client address (an IPv6 /64) may hold open on this replica;
    /// more are closed as soon as accepted (0: no cap). Loopback peers (a balancer on the
    /// same host) are not capped.
    #[arg(
        long,
        env = "STATKI_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = 256
    )]
    pub max_connections_per_address: usize,

    /// Seconds a client has to send a whole request head (from its first byte, or from
    /// the accept for a connection's first request); beyond, the connection is dropped.
    #[arg(long, env = "STATKI_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10)]
    pub header_read_timeout_seconds: u64,

    /// Seconds a connection may sit with no request in progress and no traffic before it
    /// is closed. Must exceed the event streams' 15 s keep-alive.
    #[arg(long, env = "STATKI_IDLE_TIMEOUT_SECONDS", default_value_t = 60)]
    pub idle_timeout_seconds: u64,

    /// Most open connections on this replica; more are closed as soon as accepted.
    #[arg(long, env = "STATKI_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    /// Memory, in MiB, for the match states a replica keeps to decide commands without a
    /// lock round trip (under 2 KiB per match in play; the default holds over 70,000).
    #[arg(long, env = "STATKI_KEPT_STATES_MIB", default_value_t = 128)]
    pub kept_states_mib: u64,

    /// The role the service works as once migrations ran as DATABASE_URL's role (the owner):
    /// every pooled connection runs `SET ROLE` to it. It owns nothing and may only insert and
    /// read the event log (see docs/security.md). Empty: work as DATABASE_URL's role.
    #[arg(long, env = "STATKI_DB_ROLE", default_value = "statki_app")]
    pub db_role: String,

    /// Largest database connection pool.
    #[arg(long, env = "STATKI_DB_POOL", default_value_t = 16)]
    pub db_pool: u32,

    #[command(subcommand)]
    pub command: Option<Task>,
}

impl Config {
    /// The role to work as, if any.
    pub fn db_role(&self) -> Option<&str> {
        Some(self.db_role.trim()).filter(|role| !role.is_empty())
    }

    /// The connection limits as configured.
    pub fn connection_settings(&self) -> ConnectionSettings {
        ConnectionSettings {
            header_read_timeout: Duration::from_secs(self.header_read_timeout_seconds.max(1)),
            idle_timeout: Duration::from_secs(self.idle_timeout_seconds.max(1)),
            max_connections: self.max_connections.max(1),
            max_connections_per_address: self.max_connections_per_address,
        }
    }

    /// Who may read `/metrics` on the API address.
    pub fn metrics_access(&self) -> MetricsAccess {
        match (&self.metrics_listen, &self.metrics_token) {
            (Some(_), _) => MetricsAccess::Elsewhere,
            (None, Some(token)) => MetricsAccess::Token(token.clone()),
            (None, None) if self.metrics_open => MetricsAccess::Open,
            (None, None) => MetricsAccess::Elsewhere,
        }
    }

    /// The rate limits as configured; `None` when they are off.
    pub fn rate_limit_settings(&self) -> Option<RateLimitSettings> {
        self.rate_limits.then(|| RateLimitSettings {
            register: Rate::per_minute(self.register_per_minute, self.register_burst),
            login: Rate::per_minute(self.login_per_minute, self.login_burst),
            player: Rate::per_second(self.player_per_second, self.player_burst),
            address: Rate::per_second(self.address_per_second, self.address_burst),
            trusted_proxy_header: self.trusted_proxy_header.clone(),
            trusted_proxies: self.trusted_proxies.clone(),
            export_caller: Rate::per_second(
                self.export_bytes_per_second,
                self.export_bytes_per_second.saturating_mul(4),
            ),
            export_target: Rate::per_second(
                self.export_target_bytes_per_second,
                self.export_target_bytes_per_second.saturating_mul(4),
            ),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, Subcommand)]
pub enum Task {
    /// Serve the API (the default).
    Serve,
    /// Print the OpenAPI document (YAML) and exit.
    Openapi,
    /// Create the database if it is missing, run the migrations (which distribute the
    /// tables where the `citus` extension exists) and exit, as `serve` does before serving.
    Migrate,
    /// Re-fold every match from its events and check the stored rows, results, rating
    /// changes and fleet commitments; exit non-zero on any mismatch.
    Verify,
}

/// The longest origin CORS may allow (and so the longest `Access-Control-Allow-Origin`
/// the server sends, as openapi.yaml states).
pub const CORS_ORIGIN_MAX: usize = 2048;

fn cors_origin(text: &str) -> Result<String, String> {
    if text.len() > CORS_ORIGIN_MAX {
        return Err(format!(
            "an origin has at most {CORS_ORIGIN_MAX} characters"
        ));
    }
    Ok(text.to_owned())
}
