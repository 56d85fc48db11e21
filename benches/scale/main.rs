//! What Statki costs once the database holds years of play. Builds two databases, one
//! holding only what the measurements need (the empty side) and one that also holds a
//! history made by the engine (by default 1,000,000 finished matches with their whole event
//! logs, 100,000 players rated on all three ladders), loaded with `COPY`; brings 10,000
//! matches to their first shot on each through the API; then measures on both the same
//! paths and prints them side by side: shots round-robin over the matches in play (8 and 64
//! connections, with `pgbench`'s naive shot beside them), a match view, the open and live
//! lists, a player's matches (first page and page 50), the ladder, a player's own rank, an
//! event-stream catch-up, the clock sweep's and the bot worker's poll, every audit query of
//! the README (as `statki_auditor`) and `statki verify`. It also reports the disk used per
//! finished match and what a year of 100,000 matches a day would take.
//!
//! Both sides are built first and both services keep running; then `SCALE_ROUNDS` rounds
//! of measurements alternate between them (empty, history, empty, history, …), `statki
//! verify` runs once on each, and `pgbench` alternates as many rounds with the services
//! stopped. Each figure printed is the median of its rounds, with every round's p99 (and
//! rate) in its note and the machine's 1-minute load average printed for each round.
//!
//! `DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo bench --bench scale`
//! (optional: `SCALE_FINISHED=1000000`, `SCALE_PLAYERS=100000`, `SCALE_IN_PLAY=10000`,
//! `SCALE_SECONDS=10` per shot run, `SCALE_SAMPLES=500` requests per read path,
//! `SCALE_AUDIT_RUNS=3`, `SCALE_ROUNDS=3`, `SCALE_VERIFY=0` to skip `statki verify`,
//! `SCALE_KEEP=1` to keep both databases, `SCALE_SEED=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod history;
#[path = "../service/mod.rs"]
mod service;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};
use sqlx::migrate::MigrateDatabase;
use sqlx::{PgPool, Postgres};
use uuid::Uuid;

use history::History;
use service::{
    Client, Live, Server, database_url, drop_database, env_or, fill, percentile, play, prepare,
    prepare_for, register, round_robin, run_pgbench,
};

/// What one measured path took: every sample's latency, or a rate.
#[derive(Default)]
struct Measured {
    latencies: Vec<Duration>,
    /// Throughput where the path is one (shots/s, matches verified/s).
    rate: Option<f64>,
    /// p50 and p99 taken elsewhere (`pgbench`'s log), in place of `latencies`.
    quantiles: Option<(Duration, Duration)>,
    note: String,
}

impl Measured {
    fn of(mut latencies: Vec<Duration>) -> Self {
        latencies.sort();
        Measured {
            latencies,
            ..Measured::default()
        }
    }

    fn p(&self, q: f64) -> Option<f64> {
        if let Some((p50, p99)) = self.quantiles {
            // Only the two quantiles the table prints are known.
            let taken = if q < 0.75 { p50 } else { p99 };
            return Some(taken.as_secs_f64() * 1e3);
        }
        (!self.latencies.is_empty()).then(|| percentile(&self.latencies, q).as_secs_f64() * 1e3)
    }
}

/// Every measurement of one side, by name, in the order taken.
type Side = Vec<(String, Measured)>;

/// Times `samples` runs of `call`.
async fn sample<F, Fut>(samples: usize, mut call: F) -> Measured
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut latencies = Vec::with_capacity(samples);
    for n in 0..samples {
        let started = Instant::now();
        call(n).await;
        latencies.push(started.elapsed());
    }
    Measured::of(latencies)
}

async fn get(client: &Client, path: &str, token: &str) -> Value {
    let (status, body, _) = client
        .call(reqwest::Method::GET, path, Some(token), None)
        .await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// The history side's load: players, finished matches in chunks, standings; with figures.
async fn load_history(pool: &PgPool, players: usize, finished: usize, seed: u64) -> History {
    let started = Instant::now();
    let years = 3;
    let now = Utc::now();
    let start = now - chrono::Duration::days(365 * years);
    let spacing =
        chrono::Duration::milliseconds((365 * years * 86_400_000 / finished.max(1) as i64).max(1));
    let ids: Vec<Uuid> = (0..players)
        .map(|n| {
            Uuid::new_v7(uuid::Timestamp::from_unix(
                uuid::NoContext,
                start.timestamp() as u64 - 86_400,
                n as u32,
            ))
        })
        .collect();
    let named: Vec<(Uuid, statki::names::PlayerName)> = ids
        .iter()
        .enumerate()
        .map(|(n, &id)| {
            let name = statki::names::PlayerName::parse(&format!("captain {n}")).unwrap();
            (id, name)
        })
        .collect();
    let mut conn = pool.acquire().await.unwrap();
    statki::store::bulk::begin_load(&mut conn).await.unwrap();
    statki::store::bulk::copy_players(&mut conn, &named, start - chrono::Duration::days(1))
        .await
        .unwrap();
    let mut history = History::new(ids, 1000, seed, start, spacing);
    println!(
        "  {players} players; {} scripted games played by the bots in {:.1} s",
        3 * 1000,
        started.elapsed().as_secs_f64()
    );
    // The engine replays one chunk while the previous one is copied.
    let (sender, mut receiver) = tokio::sync::mpsc::channel(2);
    let chunk = 5_000;
    let maker = std::thread::spawn(move || {
        let mut left = finished;
        while left > 0 {
            let n = left.min(chunk);
            left -= n;
            if sender.blocking_send(history.next_chunk(n)).is_err() {
                break;
            }
        }
        history
    });
    let (mut matches, mut events) = (0usize, 0usize);
    let loading = Instant::now();
    while let Some(loaded) = receiver.recv().await {
        matches += loaded.len();
        events += loaded.iter().map(|m| m.events.len()).sum::<usize>();
        statki::store::bulk::copy_matches(&mut conn, &loaded)
            .await
            .unwrap();
        if matches % 100_000 < chunk {
            println!(
                "  {matches} matches, {events} events loaded ({:.0} matches/s)",
                matches as f64 / loading.elapsed().as_secs_f64()
            );
        }
    }
    let history = maker.join().unwrap();
    statki::store::bulk::copy_standings(&mut conn, &history.standings(&named))
        .await
        .unwrap();
    statki::store::bulk::end_load(&mut conn, &[("finished", matches as i64)])
        .await
        .unwrap();
    let vacuum = Instant::now();
    sqlx::query("VACUUM (ANALYZE)")
        .execute(&mut *conn)
        .await
        .unwrap();
    println!(
        "  history: {matches} finished matches, {events} events ({:.1} per match) in {:.0} s, \
         then VACUUM (ANALYZE) in {:.0} s",
        events as f64 / matches.max(1) as f64,
        loading.elapsed().as_secs_f64(),
        vacuum.elapsed().as_secs_f64()
    );
    history
}

/// Opens 200 matches waiting for an opponent, from players of their own.
async fn open_matches(client: &Client) {
    for n in 0..200 {
        let (_, token) = service::register(client, &format!("host-{n}")).await;
        let (status, body, _) = client
            .call(
                reqwest::Method::POST,
                "/v1/matches",
                Some(&token),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
}

/// Reads a match's event stream from its start until the event `last` arrives.
async fn catch_up(client: &Client, id: &str, token: &str, last: i64) {
    let response = client
        .http
        .get(format!("{}/v1/matches/{id}/stream", client.base))
        .bearer_auth(token)
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let wanted = format!("id: {last}\n");
    let wanted_compact = format!("id:{last}\n");
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        if text.contains(&wanted) || text.contains(&wanted_compact) {
            return;
        }
    }
    panic!("the stream of {id} ended before event {last}");
}

/// The README's audit queries: every `sql` block of "Auditing with SQL", named by its first
/// comment line.
fn audit_queries() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme
        .split("\n## ")
        .find(|part| part.starts_with("Auditing with SQL"))
        .expect("the audit section");
    section
        .split("```sql\n")
        .skip(1)
        .filter_map(|block| {
            let sql = block.split("\n```").next()?;
            let name = sql
                .lines()
                .next()?
                .trim_start_matches("--")
                .trim()
                .to_owned();
            Some((name, sql.to_owned()))
        })
        .collect()
}

/// One side's measurements. `history` loads years of play first.
/// One side of the comparison: its database made and filled, its service running.
struct Prepared {
    label: String,
    database: String,
    url: String,
    admin: PgPool,
    server: Option<Server>,
    live: Vec<Live>,
    /// Matches played to the end on this side: id and a player's token.
    ended: Vec<(String, String)>,
    /// Whose matches and profile are read: the history's player with the most matches, or
    /// on the empty side a player with two pages of them.
    listed: Uuid,
}

/// Makes one side's database (with a history when given), starts its service, brings
/// `SCALE_IN_PLAY` matches to their first shot, plays 20 to the end and opens 200.
async fn prepare_side(
    label: &str,
    base_url: &str,
    database: &str,
    history: Option<(usize, usize, u64)>,
) -> Prepared {
    let in_play = env_or("SCALE_IN_PLAY", 10_000);
    let url = database_url(base_url, database);
    Postgres::drop_database(&url).await.ok();
    Postgres::create_database(&url).await.unwrap();
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .unwrap();
    statki::store::migrate(&admin).await.unwrap();
    println!("{label}:");
    let busiest = match history {
        Some((players, finished, seed)) => Some(
            load_history(&admin, players, finished, seed)
                .await
                .busiest_player(),
        ),
        None => None,
    };
    let mut conn = admin.acquire().await.unwrap();
    let sizes = statki::store::bulk::bytes_of_play(&mut conn).await.unwrap();
    drop(conn);
    if let Some((_, finished, _)) = history {
        let total: i64 = sizes.iter().map(|(_, bytes)| bytes).sum();
        let per_match = total as f64 / finished.max(1) as f64;
        for (table, bytes) in &sizes {
            println!("  {table:<16} {:>9.1} MiB", *bytes as f64 / 1048576.0);
        }
        println!(
            "  disk per finished match {:.1} KiB (all tables of play with their indexes); \
             a year of 100,000 matches a day: {:.0} GiB",
            per_match / 1024.0,
            per_match * 100_000.0 * 365.0 / 1073741824.0
        );
    }

    let server = Server::start(
        &url,
        &[
            ("STATKI_PLACEMENT_SECONDS", "36000"),
            ("STATKI_SHOT_SECONDS", "36000"),
            // The open matches must outlast the other side's load (the default 900 s
            // cancelled the empty side's before its first round).
            ("STATKI_JOIN_SECONDS", "36000"),
        ],
    )
    .await;
    let client = server.client.clone();
    let started = Instant::now();
    let live = fill(&client, in_play).await;
    // A few matches played to the end on both sides, to view and stream.
    let mut ended = Vec::new();
    for n in 0..20 {
        let ready = prepare(&client, &format!("ended-{n}")).await;
        let (id, token) = (ready.id.clone(), ready.players[0].1.clone());
        play(&client, ready).await;
        ended.push((id, token));
    }
    open_matches(&client).await;
    // Without a history, a player with two pages of finished ranked matches, so that both
    // sides list full pages of a player's matches and of the ladder, and the profile has a
    // record and a rank to show.
    let (listed, regular_note) = match busiest {
        Some(busiest) => (busiest, String::new()),
        None => (
            play_regular(&client, REGULAR_MATCHES).await,
            format!(", {REGULAR_MATCHES} ranked ones played to the end by one player"),
        ),
    };
    println!(
        "  {in_play} matches in play, 20 played to the end, 200 open{regular_note}, in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    // Fresh planner statistics on both sides, as autovacuum would have taken by then: the
    // history side's were taken before these matches, the empty side had none at all.
    sqlx::query("ANALYZE").execute(&admin).await.unwrap();
    Prepared {
        label: label.to_owned(),
        database: database.to_owned(),
        url,
        admin,
        server: Some(server),
        live,
        ended,
        listed,
    }
}

/// Ranked matches the empty side's regular player plays to the end: two full pages of 50
/// of their matches, and a full first page of the `statki` ladder (three in five are
/// `statki`, one `classic`, one `battaglia`, so the profile ranks them on all three, as it
/// does the history's busiest player).
const REGULAR_MATCHES: usize = 100;

/// The rule set of the regular player's `n`th match.
fn regular_ruleset(n: usize) -> &'static str {
    match n % 5 {
        3 => "classic",
        4 => "battaglia",
        _ => "statki",
    }
}

/// Registers a player and plays `count` ranked matches to the end against new opponents, 4
/// at a time (a player may hold 5 unjoined matches); the player's id.
async fn play_regular(client: &std::sync::Arc<Client>, count: usize) -> Uuid {
    let regular = register(client, "regular").await;
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (client, regular, next) = (client.clone(), regular.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= count {
                        return;
                    }
                    let name = format!("regular-{n}");
                    let settings = json!({"ruleset": regular_ruleset(n), "ranked": true});
                    let ready = prepare_for(&client, regular.clone(), &name, settings).await;
                    play(&client, ready).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    regular.0.parse().unwrap()
}

/// One round of every request path, poll and audit query on a prepared side.
async fn measure_round(prepared: &mut Prepared) -> Side {
    let samples = env_or("SCALE_SAMPLES", 500);
    let seconds = env_or("SCALE_SECONDS", 10) as f64;
    let client = prepared
        .server
        .as_ref()
        .expect("the side's service runs until its rounds are over")
        .client
        .clone();
    let admin = prepared.admin.clone();
    let ended = &prepared.ended;
    let mut side: Side = Vec::new();

    // Shots first: in the first round on a service that has read nothing else yet.
    for connections in [8, 64] {
        let live = std::mem::take(&mut prepared.live);
        let (back, latencies, took) = round_robin(&client, live, connections, seconds).await;
        prepared.live = back;
        let mut shots = Measured::of(latencies);
        shots.rate = Some(shots.latencies.len() as f64 / took);
        side.push((format!("shot, {connections} connections"), shots));
    }

    let watcher = &prepared.live[0].ready;
    let watcher_token = watcher.players[0].1.clone();
    let mut rng = rand::rng();
    let in_play_ids: Vec<(String, String)> = prepared
        .live
        .iter()
        .map(|m| (m.ready.id.clone(), m.ready.players[0].1.clone()))
        .collect();
    let views = sample(samples, |_| {
        let (id, token) = in_play_ids.choose(&mut rng).unwrap().clone();
        let client = client.clone();
        async move {
            get(&client, &format!("/v1/matches/{id}"), &token).await;
        }
    })
    .await;
    side.push(("view, a match in play".into(), views));
    let spectated = sample(samples, |n| {
        let (id, _) = ended[n % ended.len()].clone();
        let (client, token) = (client.clone(), watcher_token.clone());
        async move {
            get(&client, &format!("/v1/matches/{id}"), &token).await;
        }
    })
    .await;
    side.push(("view, a finished match (spectator)".into(), spectated));
    for status in ["open", "live"] {
        let path = format!("/v1/matches?status={status}");
        let listed = sample(samples, |_| {
            let (client, token, path) = (client.clone(), watcher_token.clone(), path.clone());
            async move {
                get(&client, &path, &token).await;
            }
        })
        .await;
        side.push((format!("{status} list, first page"), listed));
    }

    // A player's matches: the busiest player of the history, or the empty side's regular.
    let player = prepared.listed;
    let first_page = format!("/v1/players/{player}/matches");
    let firsts = sample(samples, |_| {
        let (client, token, path) = (client.clone(), watcher_token.clone(), first_page.clone());
        async move {
            get(&client, &path, &token).await;
        }
    })
    .await;
    side.push(("a player's matches, first page".into(), firsts));
    let mut cursor = None;
    let mut page = 1;
    while page < 50 {
        let body = get(
            &client,
            &first_page_after(&first_page, &cursor),
            &watcher_token,
        )
        .await;
        match body["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        page += 1;
    }
    let deep_path = first_page_after(&first_page, &cursor);
    let deep = sample(samples, |_| {
        let (client, token, path) = (client.clone(), watcher_token.clone(), deep_path.clone());
        async move {
            get(&client, &path, &token).await;
        }
    })
    .await;
    side.push((
        "a player's matches, page 50 (or the last)".into(),
        Measured {
            note: format!("page {page}"),
            ..deep
        },
    ));
    let ladder = sample(samples, |_| {
        let (client, token) = (client.clone(), watcher_token.clone());
        async move {
            get(&client, "/v1/ladder/statki", &token).await;
        }
    })
    .await;
    side.push(("ladder, first page".into(), ladder));
    let profile_path = format!("/v1/players/{player}");
    let profile = sample(samples, |_| {
        let (client, token, path) = (client.clone(), watcher_token.clone(), profile_path.clone());
        async move {
            let body = get(&client, &path, &token).await;
            assert!(body.is_object());
        }
    })
    .await;
    side.push(("a player's profile and own ranks".into(), profile));
    let last_seqs: Vec<i64> = {
        let mut seqs = Vec::new();
        for (id, token) in ended {
            seqs.push(
                get(&client, &format!("/v1/matches/{id}"), token).await["seq"]
                    .as_i64()
                    .unwrap(),
            );
        }
        seqs
    };
    let streams = sample(samples, |n| {
        let (id, token) = ended[n % ended.len()].clone();
        let last = last_seqs[n % ended.len()];
        let client = client.clone();
        async move {
            catch_up(&client, &id, &token, last).await;
        }
    })
    .await;
    side.push(("event stream catch-up, a whole match".into(), streams));

    // The periodic polls, as the clock task and the bot worker run them.
    let kind = statki::store::citus::Kind::of(&admin).await.unwrap();
    let clock = sample(samples, |_| {
        let admin = admin.clone();
        async move {
            let mut tx = admin.begin().await.unwrap();
            statki::store::matches::claim_due(&mut tx, kind, Utc::now(), 32)
                .await
                .unwrap();
            tx.rollback().await.unwrap();
        }
    })
    .await;
    side.push(("clock sweep, one poll".into(), clock));
    let bots = sample(samples, |_| {
        let admin = admin.clone();
        async move {
            let now = Utc::now();
            let mut tx = admin.begin().await.unwrap();
            statki::store::bots::claim_turns(
                &mut tx,
                kind,
                now - chrono::Duration::milliseconds(800),
                now - chrono::Duration::milliseconds(500),
                now + chrono::Duration::seconds(1),
                16,
            )
            .await
            .unwrap();
            statki::store::bots::rematch_offers(
                &mut *tx,
                now,
                now - chrono::Duration::milliseconds(800),
                16,
            )
            .await
            .unwrap();
            tx.rollback().await.unwrap();
        }
    })
    .await;
    side.push(("bot worker, one poll".into(), bots));

    // The README's audit queries, as the auditor.
    let runs = env_or("SCALE_AUDIT_RUNS", 3);
    for (name, sql) in audit_queries() {
        let mut conn = admin.acquire().await.unwrap();
        sqlx::query("SET ROLE statki_auditor")
            .execute(&mut *conn)
            .await
            .unwrap();
        let mut latencies = Vec::new();
        for _ in 0..runs {
            let started = Instant::now();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&mut *conn)
                .await
                .unwrap();
            latencies.push(started.elapsed());
        }
        sqlx::query("RESET ROLE").execute(&mut *conn).await.unwrap();
        side.push((format!("audit: {name}"), Measured::of(latencies)));
    }
    side
}

/// `statki verify` over a side's whole database, its service stopped.
fn verify(prepared: &Prepared) -> (String, Measured) {
    let started = Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_statki"))
        .arg("verify")
        .env("DATABASE_URL", &prepared.url)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run statki verify");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let verified: f64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("verified "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let ok = output.status.success();
    if !ok || verified == 0.0 {
        println!(
            "  statki verify: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    (
        "statki verify, the whole database".into(),
        Measured {
            latencies: vec![took],
            rate: Some(verified / took.as_secs_f64()),
            note: format!(
                "{verified} matches, {}",
                if ok { "OK" } else { "MISMATCHES" }
            ),
            ..Measured::default()
        },
    )
}

/// The naive shots of `pgbench` at 8 and 64 clients on a side whose service is stopped.
async fn naive_shots(prepared: &Prepared) -> Side {
    let seconds = env_or("SCALE_SECONDS", 10) as u64;
    let mut side = Vec::new();
    for clients in [8, 64] {
        let naive = run_pgbench(&prepared.url, &prepared.admin, clients, seconds).await;
        side.push((
            format!("pgbench naive shot, {clients} clients"),
            Measured {
                quantiles: Some((naive.p50, naive.p99)),
                rate: Some(naive.rate()),
                note: "p50, p99 from pgbench's log".into(),
                ..Measured::default()
            },
        ));
    }
    side
}

/// The 1-minute load average, to note beside each round.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// One figure per path from several rounds: the median of the rounds' p50s, p99s and rates,
/// with the rounds' p99s (or rates) in the note when there was more than one.
fn medians(rounds: Vec<Side>) -> Side {
    let mut by_name: Vec<(String, Vec<Measured>)> = Vec::new();
    for round in rounds {
        for (name, measured) in round {
            match by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, all)) => all.push(measured),
                None => by_name.push((name, vec![measured])),
            }
        }
    }
    by_name
        .into_iter()
        .map(|(name, mut all)| {
            if all.len() == 1 {
                return (name, all.remove(0));
            }
            let median = |mut values: Vec<f64>| {
                values.sort_by(f64::total_cmp);
                let middle = values.len() / 2;
                if values.len().is_multiple_of(2) {
                    (values[middle - 1] + values[middle]) / 2.0
                } else {
                    values[middle]
                }
            };
            let p50 = median(all.iter().filter_map(|m| m.p(0.5)).collect());
            let p99s: Vec<f64> = all.iter().filter_map(|m| m.p(0.99)).collect();
            let rates: Vec<f64> = all.iter().filter_map(|m| m.rate).collect();
            let spread = |values: &[f64], digits: usize| {
                values
                    .iter()
                    .map(|v| format!("{v:.digits$}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let note = if rates.is_empty() {
                format!("p99s {}", spread(&p99s, 2))
            } else {
                format!("p99s {}; rates {}", spread(&p99s, 2), spread(&rates, 0))
            };
            let first_note = all[0].note.clone();
            let measured = Measured {
                quantiles: Some((
                    Duration::from_secs_f64(p50 / 1e3),
                    Duration::from_secs_f64(median(p99s.clone()) / 1e3),
                )),
                rate: (!rates.is_empty()).then(|| median(rates.clone())),
                note: if first_note.is_empty() {
                    note
                } else {
                    format!("{first_note}; {note}")
                },
                ..Measured::default()
            };
            (name, measured)
        })
        .collect()
}

fn first_page_after(path: &str, cursor: &Option<String>) -> String {
    match cursor {
        Some(cursor) => format!("{path}?after={cursor}"),
        None => path.to_owned(),
    }
}

fn figure(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

#[tokio::main]
async fn main() {
    let base_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let finished = env_or("SCALE_FINISHED", 1_000_000);
    let players = env_or("SCALE_PLAYERS", 100_000);
    let seed = env_or("SCALE_SEED", 1) as u64;
    let rounds = env_or("SCALE_ROUNDS", 3).max(1);
    let id = std::process::id();
    let mut sides = [
        prepare_side(
            "empty database",
            &base_url,
            &format!("statki_scale_{id}_empty"),
            None,
        )
        .await,
        prepare_side(
            &format!("{finished} finished matches, {players} players"),
            &base_url,
            &format!("statki_scale_{id}_full"),
            Some((players, finished, seed)),
        )
        .await,
    ];
    // Rounds alternate between the sides, so that a change in the machine's load falls on
    // both rather than on one; each figure below is the median of its rounds.
    let mut taken: [Vec<Side>; 2] = [Vec::new(), Vec::new()];
    for round in 1..=rounds {
        for (prepared, taken) in sides.iter_mut().zip(taken.iter_mut()) {
            let started = Instant::now();
            let load = load_average();
            taken.push(measure_round(prepared).await);
            println!(
                "round {round}, {}: {:.0} s, 1-minute load average {load} → {}",
                prepared.label,
                started.elapsed().as_secs_f64(),
                load_average()
            );
        }
    }
    for prepared in &mut sides {
        if let Some(server) = prepared.server.take() {
            server.stop();
        }
    }
    if env_or("SCALE_VERIFY", 1) == 1 {
        for (prepared, taken) in sides.iter().zip(taken.iter_mut()) {
            let load = load_average();
            let verified = verify(prepared);
            println!(
                "statki verify, {}: 1-minute load average {load} → {}",
                prepared.label,
                load_average()
            );
            taken[0].push(verified);
        }
    }
    // Last, as its naive shots append events no referee decided: the same transaction shape
    // as a shot, on the same database, with the service stopped; alternating as above.
    for round in 0..rounds {
        for (prepared, taken) in sides.iter().zip(taken.iter_mut()) {
            let load = load_average();
            let naive = naive_shots(prepared).await;
            println!(
                "pgbench round {}, {}: 1-minute load average {load} → {}",
                round + 1,
                prepared.label,
                load_average()
            );
            taken[round].extend(naive);
        }
    }
    for prepared in sides {
        prepared.admin.close().await;
        if env_or("SCALE_KEEP", 0) == 0 {
            drop_database(&base_url, &prepared.database).await;
        }
    }
    let [empty, full] = taken.map(medians);
    let at_scale: BTreeMap<&str, &Measured> = full
        .iter()
        .map(|(name, measured)| (name.as_str(), measured))
        .collect();
    println!();
    println!(
        "{:<48} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>6}",
        "path (ms; rates per second)",
        "empty p50",
        "p99",
        "rate",
        "scale p50",
        "p99",
        "rate",
        "p99 ×"
    );
    for (name, before) in &empty {
        let after = at_scale.get(name.as_str());
        let ratio = match (after.and_then(|a| a.p(0.99)), before.p(0.99)) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".to_owned(),
        };
        println!(
            "{:<48} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>6}  {}",
            name,
            figure(before.p(0.5)),
            figure(before.p(0.99)),
            figure(before.rate),
            figure(after.and_then(|a| a.p(0.5))),
            figure(after.and_then(|a| a.p(0.99))),
            figure(after.and_then(|a| a.rate)),
            ratio,
            after.map_or("", |a| a.note.as_str())
        );
    }
    for (name, after) in &full {
        if !empty.iter().any(|(n, _)| n == name) {
            println!(
                "{:<48} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} |        {}",
                name,
                "-",
                "-",
                "-",
                figure(after.p(0.5)),
                figure(after.p(0.99)),
                figure(after.rate),
                after.note
            );
        }
    }
    // The shot targets: throughput against pgbench's naive shot on the same database.
    println!();
    for (label, side) in [("empty", &empty), ("scale", &full)] {
        let rate = |name: &str| {
            side.iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, m)| m.rate)
        };
        for connections in [8, 64] {
            let shots = side
                .iter()
                .find(|(n, _)| *n == format!("shot, {connections} connections"))
                .map(|(_, m)| m);
            let naive = rate(&format!("pgbench naive shot, {connections} clients"));
            if let (Some(shots), Some(naive)) = (shots, naive) {
                println!(
                    "{label}: shots at {connections} connections {:.0}/s = {:.2}× pgbench \
                     ({naive:.0}/s), p99 {} ms",
                    shots.rate.unwrap_or(0.0),
                    shots.rate.unwrap_or(0.0) / naive,
                    figure(shots.p(0.99))
                );
            }
        }
    }
}
