//! Settings from the environment and matching command-line flags. Secrets are never printed.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

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

    /// Origins allowed by CORS, comma-separated (`*` for any). Empty: none.
    #[arg(
        long,
        env = "STATKI_CORS_ORIGINS",
        value_delimiter = ',',
        default_value = ""
    )]
    pub cors_origins: Vec<String>,

    /// Log format.
    #[arg(long, env = "STATKI_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Seconds a request may take before it is answered 408.
    #[arg(long, env = "STATKI_REQUEST_TIMEOUT_SECONDS", default_value_t = 15)]
    pub request_timeout_seconds: u64,

    /// Most open event streams one player may hold on this replica (beyond: 429).
    #[arg(long, env = "STATKI_STREAMS_PER_PLAYER", default_value_t = 8)]
    pub streams_per_player: usize,

    /// Most open event streams on this replica (beyond: 429).
    #[arg(long, env = "STATKI_STREAMS_PER_REPLICA", default_value_t = 20_000)]
    pub streams_per_replica: usize,

    /// Largest database connection pool.
    #[arg(long, env = "STATKI_DB_POOL", default_value_t = 16)]
    pub db_pool: u32,

    #[command(subcommand)]
    pub command: Option<Task>,
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
    /// Re-fold every match from its events and check the stored rows, results, rating
    /// changes and fleet commitments; exit non-zero on any mismatch.
    Verify,
}
