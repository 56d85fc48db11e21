//! The `statki` binary: configuration, logging, database, migrations, clock task, live
//! hub, serve.

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use embedded_pg::EmbeddedPostgres;
use statki::app::matchmaking;
use statki::app::{App, GameSettings};
use statki::config::{Config, LogFormat, Task};
use statki::engine::Clock;
use statki::http::{self, HttpSettings};
use statki::live::{Hub, HubSettings};
use statki::{auth, bot, clock, housekeeping, store, verify};
use tracing_subscriber::EnvFilter;

// The shot path allocates many small buffers; mimalloc cut the allocator's share of the
// service's CPU (measured with perf on the shots benchmark, see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    if let Some(Task::Openapi) = config.command {
        print!("{}", http::openapi().to_yaml()?);
        return Ok(());
    }
    init_logging(config.log_format);
    if let Some(secret) = &config.jwt_secret {
        // Before anything starts: a weak or published secret must stop the service, not
        // serve forgeable tokens.
        auth::configured_secret(secret).context("refusing to start")?;
    }

    let mut embedded = None;
    let database_url = match &config.database_url {
        Some(url) => url.clone(),
        None => {
            let data_dir = match &config.data_dir {
                Some(dir) => dir.clone(),
                None => embedded_pg::default_data_dir()?,
            };
            let cluster = EmbeddedPostgres::start(&data_dir)
                .await
                .context("starting the embedded PostgreSQL (set DATABASE_URL to use your own)")?;
            let url = cluster.database_url();
            embedded = Some(cluster);
            url
        }
    };
    let served = match config.command {
        Some(Task::Verify) => verify(&config, &database_url).await,
        Some(Task::Migrate) => migrate(&config, &database_url).await,
        _ => serve(&config, &database_url).await,
    };
    if let Some(cluster) = embedded {
        cluster
            .stop()
            .await
            .context("stopping the embedded PostgreSQL")?;
    }
    served
}

/// The longest a read connection lives (half that idle).
const READ_CONNECTION_LIFETIME: Duration = Duration::from_secs(20);

/// The pool of STATKI_READ_DATABASE_URL (a streaming standby), when set: connected lazily,
/// so a standby that is down at start only sends reads to the primary. Its connections
/// are short-lived: one that a standby front opened to the leader while the standby was
/// down goes within `READ_CONNECTION_LIFETIME`, so reads return to the standby once it is
/// back rather than staying on the leader for as long as they keep the connection busy.
fn read_pool(config: &Config) -> anyhow::Result<Option<sqlx::PgPool>> {
    let Some(url) = config
        .read_database_url
        .as_deref()
        .filter(|url| !url.is_empty())
    else {
        return Ok(None);
    };
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(config.db_pool)
        .acquire_timeout(Duration::from_secs(2))
        .max_lifetime(READ_CONNECTION_LIFETIME)
        .idle_timeout(READ_CONNECTION_LIFETIME / 2)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::raw_sql(store::SESSION_SETTINGS).execute(conn).await?;
                Ok(())
            })
        })
        .connect_lazy(url)
        .context("STATKI_READ_DATABASE_URL is not a PostgreSQL URL")?;
    Ok(Some(pool))
}

/// `statki migrate`: what `serve` does to the database before it serves, and no more.
async fn migrate(config: &Config, database_url: &str) -> anyhow::Result<()> {
    let pool = store::connect_and_migrate(database_url, 1, config.db_role())
        .await
        .context("connecting to PostgreSQL and running migrations")?;
    pool.close().await;
    tracing::info!("migrations applied");
    Ok(())
}

async fn serve(config: &Config, database_url: &str) -> anyhow::Result<()> {
    let pool = store::connect_and_migrate(database_url, config.db_pool, config.db_role())
        .await
        .context("connecting to PostgreSQL and running migrations")?;
    let secret = match &config.jwt_secret {
        Some(secret) => secret.clone(),
        None => {
            let candidate = hex::encode(rand::random::<[u8; 32]>());
            store::settings::get_or_init(&pool, "jwt_secret", &candidate).await?
        }
    };
    let tokens = auth::Tokens::new(secret.as_bytes())?;
    let settings = GameSettings {
        standard_clock: Clock {
            placement_seconds: config.placement_seconds,
            shot_seconds: config.shot_seconds,
        },
        join_seconds: config.join_seconds,
        open_matches_per_player: config.open_matches_per_player,
    };
    let reader = read_pool(config)?;
    let app = App::with_kept_states(
        pool.clone(),
        reader.clone(),
        settings,
        tokens,
        config.kept_states_mib.saturating_mul(1024 * 1024),
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // Before the first request: a command that finds a run-out clock enforces it, so time
    // lost while no replica was alive must be given back first.
    clock::recover_outage(&app, uuid::Uuid::now_v7())
        .await
        .context("giving clocks back the time of an outage")?;
    let clock_task = tokio::spawn(clock::run(app.clone(), stop_rx.clone()));
    let matchmaking_task = tokio::spawn(matchmaking::run(app.clone(), stop_rx.clone()));
    let bot_worker =
        bot::worker::Worker::new(app.clone(), Duration::from_millis(config.bot_delay_ms));
    let bot_task = tokio::spawn(bot::worker::run(bot_worker, stop_rx.clone()));
    let live = Hub::start_with_reader(
        &pool,
        reader.as_ref(),
        HubSettings {
            streams_per_player: config.streams_per_player,
            streams_per_replica: config.streams_per_replica,
            ..HubSettings::default()
        },
    );

    let router = http::app(
        http::state(app.clone(), live.clone()),
        &HttpSettings {
            cors_origins: config
                .cors_origins
                .iter()
                .filter(|o| !o.is_empty())
                .cloned()
                .collect(),
            request_timeout: Some(Duration::from_secs(config.request_timeout_seconds)),
            rate_limits: config.rate_limit_settings(),
            metrics_access: config.metrics_access(),
        },
    );
    let housekeeping_task = tokio::spawn(housekeeping::run(pool.clone(), stop_rx.clone()));
    if let Some(address) = config.metrics_listen {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("binding the metrics address {address}"))?;
        tracing::info!(%address, "metrics listening");
        let metrics = http::metrics_app(http::state(app.clone(), live.clone()));
        tokio::spawn(async move { axum::serve(listener, metrics).await });
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(address = %listener.local_addr()?, "statki listening");
    let connections = config.connection_settings();
    anyhow::ensure!(
        connections.idle_timeout > HubSettings::default().keep_alive,
        "STATKI_IDLE_TIMEOUT_SECONDS must exceed the event streams' keep-alive of {} s",
        HubSettings::default().keep_alive.as_secs()
    );
    http::server::serve(
        listener,
        router,
        connections,
        async move {
            shutdown_signal().await;
            // Streams never end by themselves; a graceful shutdown would wait for ever.
            live.close();
        },
        Duration::from_secs(20),
    )
    .await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    let _ = clock_task.await;
    let _ = matchmaking_task.await;
    let _ = bot_task.await;
    let _ = housekeeping_task.await;
    pool.close().await;
    Ok(())
}

/// `statki verify`: prints the report; a mismatch is an error, so the exit status says it.
async fn verify(config: &Config, database_url: &str) -> anyhow::Result<()> {
    // A streaming standby (read-only) is verified as it is; anything else is migrated first.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(config.db_pool.min(2))
        .connect(database_url)
        .await
        .context("connecting to PostgreSQL")?;
    let standby = store::is_standby(&pool)
        .await
        .context("asking whether the server is a standby")?;
    if !standby {
        pool.close().await;
        let migrated =
            store::connect_and_migrate(database_url, config.db_pool.min(2), config.db_role())
                .await
                .context("connecting to PostgreSQL and running migrations")?;
        return verify_on(migrated).await;
    }
    verify_on(pool).await
}

async fn verify_on(pool: sqlx::PgPool) -> anyhow::Result<()> {
    let report = verify::run(&pool).await.context("reading the database")?;
    pool.close().await;
    println!("{report}");
    anyhow::ensure!(report.ok(), "{} mismatches", report.mismatches.len());
    Ok(())
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
