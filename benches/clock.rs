//! Clock load generator: thousands of shot clocks running out within one second.
//!
//! `cargo bench --bench clock` (not part of `cargo test`). For each replica count it creates
//! a throwaway database on `DATABASE_URL`'s server, fills it with battles whose deadlines all
//! fall inside the same second, runs that many clock tasks in-process (each with its own
//! pool, as separate replicas would), and prints:
//! - lag from each deadline to its committed result, as seen by a `LISTEN` on the events
//!   channel (notifications are delivered at commit): p50, p99, max;
//! - database transactions per second while clocks are armed but nothing is due, from
//!   `pg_stat_database` deltas read over a separate connection.
//!
//! Settings (environment): `DATABASE_URL` (default the local server), `CLOCK_BENCH_MATCHES`
//! (5000), `CLOCK_BENCH_SPREAD_MS` (1000), `CLOCK_BENCH_REPLICAS` (`1,3`),
//! `CLOCK_BENCH_IDLE_SECONDS` (20), `CLOCK_BENCH_LEAD_SECONDS` (time allowed for filling,
//! default 30), `CLOCK_BENCH_POOL` (connections per replica, default 16 as `STATKI_DB_POOL`).

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool};
use statki::app::{App, Committed, GameSettings, Herald};
use statki::auth::Tokens;
use statki::engine::{
    Cell, Clock, Command, Draw, Event, HouseOptions, Match, MatchRules, Orientation, Placement,
    RuleSetId,
};
use statki::{clock, store};
use uuid::Uuid;

const SHOT_SECONDS: u32 = 30;
/// Matches with a clock armed far ahead, so the idle planner has a deadline to look at.
const ARMED_FAR: usize = 200;

struct Settings {
    url: String,
    matches: usize,
    spread: chrono::Duration,
    replicas: Vec<usize>,
    idle: Duration,
    lead: chrono::Duration,
    pool: u32,
}

fn env_or<T: FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}: cannot parse `{value}`")),
        Err(_) => Ok(default),
    }
}

impl Settings {
    fn from_env() -> anyhow::Result<Self> {
        let replicas = std::env::var("CLOCK_BENCH_REPLICAS").unwrap_or_else(|_| "1,3".into());
        Ok(Self {
            url: std::env::var("DATABASE_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into()),
            matches: env_or("CLOCK_BENCH_MATCHES", 5000)?,
            spread: chrono::Duration::milliseconds(env_or("CLOCK_BENCH_SPREAD_MS", 1000)?),
            replicas: replicas
                .split(',')
                .map(|n| n.trim().parse().context("CLOCK_BENCH_REPLICAS"))
                .collect::<anyhow::Result<_>>()?,
            idle: Duration::from_secs(env_or("CLOCK_BENCH_IDLE_SECONDS", 20)?),
            lead: chrono::Duration::seconds(env_or("CLOCK_BENCH_LEAD_SECONDS", 30)?),
            pool: env_or("CLOCK_BENCH_POOL", 16)?,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::from_env()?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let base: PgConnectOptions = settings.url.parse().context("DATABASE_URL")?;
    let admin = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(base.clone())
        .await?;
    println!(
        "clock benchmark: {} matches, deadlines spread over {} ms, {} CPUs, load average {}",
        settings.matches,
        settings.spread.num_milliseconds(),
        std::thread::available_parallelism().map_or(0, usize::from),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    );
    for &replicas in &settings.replicas {
        let name = format!("statki_clock_bench_{}_{replicas}", std::process::id());
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await?;
        let result = scenario(&settings, &admin, base.clone().database(&name), replicas).await;
        sqlx::query(AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")))
            .execute(&admin)
            .await?;
        result?;
    }
    Ok(())
}

fn fleet() -> anyhow::Result<Vec<Placement>> {
    ["A1", "A3", "A5", "A7", "A9"]
        .iter()
        .map(|bow| {
            Ok(Placement {
                cell: Cell::from_str(bow).map_err(|e| anyhow::anyhow!("{e}"))?,
                orientation: Orientation::Horizontal,
            })
        })
        .collect()
}

/// A battle between `a` and `b` whose first shot clock runs out at `deadline`, built by the
/// engine itself so its log and row are exactly what the service would have written.
fn battle(
    a: Uuid,
    b: Uuid,
    deadline: DateTime<Utc>,
    fleet: &[Placement],
) -> anyhow::Result<(Match, Vec<Event>)> {
    let clock = Clock {
        placement_seconds: 120,
        shot_seconds: SHOT_SECONDS,
    };
    let rules = MatchRules::new(RuleSetId::Statki, HouseOptions::default(), clock, 900)?;
    let start = deadline - chrono::Duration::seconds(i64::from(SHOT_SECONDS));
    let created = Match::create(a, rules, false, None, start)?;
    let mut state = Match::fold([&created])?;
    let mut events = vec![created];
    let draw = Draw {
        coin: false,
        salt: [7; 16],
    };
    events.extend(state.execute(b, &Command::Join, start, draw)?);
    for player in [a, b] {
        let placements = fleet.to_vec();
        events.extend(state.execute(player, &Command::PlaceFleet { placements }, start, draw)?);
    }
    Ok((state, events))
}

async fn insert_matches(
    pool: &PgPool,
    batch: Vec<(Uuid, Match, Vec<Event>)>,
) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    for (id, state, events) in batch {
        let at = Utc::now();
        let last = i64::try_from(events.len())?;
        store::matches::insert(&mut tx, id, &state, last, at).await?;
        store::events::append(&mut *tx, id, 0, at, &events).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn db_now(pool: &PgPool) -> anyhow::Result<DateTime<Utc>> {
    Ok(sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(pool)
        .await?)
}

async fn transactions(admin: &PgPool, database: &str) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1",
    )
    .bind(database)
    .fetch_one(admin)
    .await?)
}

/// Busy and total CPU ticks of the whole host (Linux), to tell a CPU-bound run.
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|n| n.parse().ok())
        .collect();
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

/// CPU ticks (user + system) of this process: the clock replicas run in it.
fn own_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// CPU ticks of every PostgreSQL process on the host (they serve other databases too).
fn postgres_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter(|stat| stat.contains("(postgres)"))
        .filter_map(|stat| {
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        })
        .sum()
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(wait) = (at - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

/// Heartbeat writes to `replicas`, and index plus sequential scans of `matches`: what the
/// clock's planning statement touches, whoever else uses the database.
async fn table_counters(pool: &PgPool) -> anyhow::Result<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT (SELECT n_tup_ins + n_tup_upd FROM pg_stat_user_tables WHERE relname = 'replicas'),
                (SELECT coalesce(idx_scan, 0) + coalesce(seq_scan, 0)
                 FROM pg_stat_user_tables WHERE relname = 'matches')",
    )
    .fetch_one(pool)
    .await?)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn scenario(
    settings: &Settings,
    admin: &PgPool,
    options: PgConnectOptions,
    replicas: usize,
) -> anyhow::Result<()> {
    let database = options.get_database().unwrap_or_default().to_owned();
    let setup = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options.clone())
        .await?;
    store::migrate(&setup).await?;

    let players: Vec<Uuid> = (0..200).map(|_| Uuid::now_v7()).collect();
    for (n, id) in players.iter().enumerate() {
        store::players::insert(
            &setup,
            *id,
            &statki::names::PlayerName::parse(&format!("bench-{n}"))?,
        )
        .await?;
    }
    let fleet = fleet()?;
    let filling = db_now(&setup).await?;
    let first = filling + settings.lead;
    let step = settings.spread / i32::try_from(settings.matches.max(1))?;
    let mut deadlines = HashMap::with_capacity(settings.matches);
    let mut built = Vec::with_capacity(settings.matches + ARMED_FAR);
    for i in 0..settings.matches + ARMED_FAR {
        let (a, b) = (players[(2 * i) % 200], players[(2 * i + 1) % 200]);
        let deadline = if i < settings.matches {
            first + step * i32::try_from(i)?
        } else {
            first + chrono::Duration::hours(1)
        };
        let (state, events) = battle(a, b, deadline, &fleet)?;
        let id = Uuid::now_v7();
        if i < settings.matches {
            deadlines.insert(id, deadline);
        }
        built.push((id, state, events));
    }
    let mut chunks = Vec::new();
    while !built.is_empty() {
        let rest = built.split_off(built.len().saturating_sub(250));
        chunks.push(rest);
    }
    let mut inserts = tokio::task::JoinSet::new();
    for chunk_group in chunks.chunks(chunks.len().div_ceil(4).max(1)) {
        let (pool, group) = (setup.clone(), chunk_group.to_vec());
        inserts.spawn(async move {
            for chunk in group {
                insert_matches(&pool, chunk).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = inserts.join_next().await {
        done??;
    }
    let ready = db_now(&setup).await?;
    println!(
        "replicas={replicas} filled {} matches in {} ms",
        settings.matches + ARMED_FAR,
        (ready - filling).num_milliseconds()
    );
    if ready > first - chrono::Duration::seconds(3) {
        bail!("filling took too long; raise CLOCK_BENCH_LEAD_SECONDS");
    }

    // Every replica tells what it committed, as it tells its live hub in the service.
    let (told, mut hearing) = tokio::sync::mpsc::unbounded_channel::<(Uuid, DateTime<Utc>)>();
    let expected = settings.matches;
    let heard = tokio::spawn(async move {
        let mut heard: Vec<(Uuid, DateTime<Utc>)> = Vec::with_capacity(expected);
        while heard.len() < expected {
            let Some(one) = hearing.recv().await else {
                bail!("every replica stopped");
            };
            heard.push(one);
        }
        anyhow::Ok(heard)
    });

    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    let mut pools = Vec::new();
    for _ in 0..replicas {
        let pool = PgPoolOptions::new()
            .max_connections(settings.pool)
            .connect_with(options.clone())
            .await?;
        let app = App::new(
            pool.clone(),
            GameSettings {
                standard_clock: Clock {
                    placement_seconds: 120,
                    shot_seconds: SHOT_SECONDS,
                },
                join_seconds: 900,
                open_matches_per_player: 100,
            },
            Tokens::new(b"clock-bench-secret-of-at-least-32-bytes")?,
        );
        app.tell_commits_to(std::sync::Arc::new(Told(told.clone())));
        tasks.push(tokio::spawn(clock::run(app, stop_rx.clone())));
        pools.push(pool);
    }

    // The host's clock is the database's (same machine); the offset corrects what is left.
    let before = Utc::now();
    let then = db_now(&setup).await?;
    let offset = then - (before + (Utc::now() - before) / 2);
    let wait = (first + settings.spread - then + chrono::Duration::seconds(60)).to_std()?;
    sleep_until(first).await;
    let cpu_before = cpu_ticks();
    let own_before = own_ticks();
    let pg_before = postgres_ticks();
    let Ok(heard) = tokio::time::timeout(wait, heard).await else {
        bail!("not every result arrived within a minute of the last deadline");
    };
    let heard = heard??;
    let own = own_ticks()
        .zip(own_before)
        .map(|(after, before)| after - before);
    let pg = postgres_ticks().saturating_sub(pg_before);
    let cpu = cpu_ticks()
        .zip(cpu_before)
        .map(|((busy, total), (busy0, total0))| {
            100.0 * (busy - busy0) as f64 / (total - total0).max(1) as f64
        });

    let mut lags: Vec<f64> = heard
        .iter()
        .filter_map(|(id, at)| {
            let deadline = deadlines.get(id)?;
            Some((*at + offset - *deadline).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    lags.sort_by(f64::total_cmp);
    let finished: (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT match_id) FROM match_events WHERE kind = 'match_finished'",
    )
    .fetch_one(&setup)
    .await?;
    let early = lags.iter().filter(|lag| **lag < 0.0).count();
    let span = heard
        .iter()
        .map(|(_, at)| *at)
        .max()
        .map(|last| last + offset - first);
    println!(
        "replicas={replicas} matches={} lag_ms p50={:.1} p99={:.1} max={:.1} \
         early={early} finished_events={} distinct={} last_result_after_first_deadline_ms={} \
         host_cpu_busy={} cpu_ticks: bench={own:?} postgres={pg} host={:?}",
        lags.len(),
        percentile(&lags, 50.0),
        percentile(&lags, 99.0),
        percentile(&lags, 100.0),
        finished.0,
        finished.1,
        span.map_or(-1, |span| span.num_milliseconds()),
        cpu.map_or_else(|| "n/a".to_owned(), |cpu| format!("{cpu:.0}%")),
        cpu_ticks()
            .zip(cpu_before)
            .map(|(a, b)| (a.0 - b.0, a.1 - b.1)),
    );
    if finished != (i64::try_from(expected)?, i64::try_from(expected)?) {
        bail!("some match did not finish exactly once: {finished:?}");
    }

    // Leave autovacuum nothing to do, so the idle figure counts the clock alone.
    sqlx::query("VACUUM ANALYZE").execute(&setup).await?;
    // PostgreSQL 15 flushes an idle backend's pending counters up to 10 s late: wait them out
    // so the window holds idle work only.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let before = table_counters(&setup).await?;
    let start = transactions(admin, &database).await?;
    let started = std::time::Instant::now();
    tokio::time::sleep(settings.idle).await;
    let end = transactions(admin, &database).await?;
    let seconds = started.elapsed().as_secs_f64();
    let after = table_counters(&setup).await?;
    let per_second = (end - start) as f64 / seconds;
    println!(
        "replicas={replicas} idle: {} transactions in {seconds:.1} s = {per_second:.2}/s in all \
         ({:.2}/s per replica; autovacuum visits count here too); heartbeats {:.2}/s, \
         scans of matches {:.2}/s",
        end - start,
        per_second / replicas as f64,
        (after.0 - before.0) as f64 / seconds,
        (after.1 - before.1) as f64 / seconds,
    );
    setup.close().await;

    let _ = stop.send(true);
    for task in tasks {
        let _ = task.await;
    }
    for pool in pools {
        pool.close().await;
    }
    Ok(())
}

/// Hears every match a replica committed a change to, with the time it was told.
struct Told(tokio::sync::mpsc::UnboundedSender<(Uuid, DateTime<Utc>)>);

impl Herald for Told {
    fn committed(&self, committed: Committed) {
        let at = Utc::now();
        for change in committed.matches {
            let _ = self.0.send((change.id, at));
        }
    }
}
