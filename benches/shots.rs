//! Load generator for the shot path, side by side with the naive ceiling: runs the real
//! `statki` binary against PostgreSQL and, for each connection count, plays that many
//! matches concurrently over loopback HTTP, then runs `pgbench` on the same database with
//! the same number of clients and the naive transaction shape of a shot (lock the match
//! row, insert an event, update the row; one transaction per shot). Prints throughput,
//! latency percentiles, the service's CPU time per shot (read from /proc, so client and
//! database work are not counted) and the ratio of the two throughputs.
//!
//! `DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo bench --bench shots`
//! (optional: `SHOTS_CONNECTIONS=8,64` connection counts, `SHOTS_ROUNDS=3` matches per
//! connection, `SHOTS_REPEATS=3` alternating runs of each side per connection count, whose
//! medians are compared, `SHOTS_PGBENCH_SECONDS=10`, `PGBENCH=/path/to/pgbench`,
//! `STATKI_BIN=` another build of the service to measure instead of this one).
//!
//! `STATKI_BENCH_IN_PLAY=10000` measures with that many matches in play instead: it first
//! brings them to their first shot through the API (64 at a time), then fires round-robin
//! shots over a working set of them (`STATKI_BENCH_WORKING_SET`, default all) for
//! `SHOTS_SECONDS` (default 10) at each of `SHOTS_CONNECTIONS`, each connection owning its
//! share of the matches, then the hostile order at 64 connections: every remaining shot of
//! both seats of `STATKI_BENCH_HOSTILE_MATCHES` (default 64) other matches, shuffled, so one
//! match often has several in flight (out-of-turn shots are answered 409 and counted apart).
//! Each mode prints shots/s, p50, p99 and the change in `pg_stat_database.deadlocks`. This
//! mode runs no pgbench comparison.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const COLUMNS: &str = "ABCDEFGHIJ";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let after_name = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value, Duration) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let started = Instant::now();
        let response = request.send().await.expect("send");
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body, started.elapsed())
    }
}

async fn register(client: &Client, name: &str) -> (String, String) {
    let (_, body, _) = client
        .call(
            reqwest::Method::POST,
            "/v1/players",
            None,
            Some(json!({"name": name})),
        )
        .await;
    (
        body["id"].as_str().unwrap().to_owned(),
        body["token"].as_str().unwrap().to_owned(),
    )
}

struct Ready {
    id: String,
    players: [(String, String); 2],
    turn: usize,
}

/// Registers two players and brings a match to its first shot.
async fn prepare(client: &Client, name: &str) -> Ready {
    let a = register(client, &format!("a-{name}")).await;
    let b = register(client, &format!("b-{name}")).await;
    let (_, created, _) = client
        .call(
            reqwest::Method::POST,
            "/v1/matches",
            Some(&a.1),
            Some(json!({})),
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    client
        .call(
            reqwest::Method::POST,
            &format!("/v1/matches/{id}/join"),
            Some(&b.1),
            None,
        )
        .await;
    let ships: Vec<Value> = ["A1", "A3", "A5", "A7", "A9"]
        .iter()
        .map(|cell| json!({"cell": cell, "orientation": "horizontal"}))
        .collect();
    let fleet = json!({ "ships": ships });
    for player in [&a, &b] {
        client
            .call(
                reqwest::Method::PUT,
                &format!("/v1/matches/{id}/fleet"),
                Some(&player.1),
                Some(fleet.clone()),
            )
            .await;
    }
    let (_, view, _) = client
        .call(
            reqwest::Method::GET,
            &format!("/v1/matches/{id}"),
            Some(&a.1),
            None,
        )
        .await;
    let turn = if view["turn"] == a.0.as_str() { 0 } else { 1 };
    Ready {
        id,
        players: [a, b],
        turn,
    }
}

/// Plays a prepared match to the end (both sides shoot row by row): the shot latencies.
async fn play(client: &Client, ready: Ready) -> Vec<Duration> {
    let Ready {
        id,
        players,
        mut turn,
    } = ready;
    let mut next = [0usize; 2];
    let mut latencies = Vec::new();
    loop {
        let n = next[turn];
        let cell = format!("{}{}", &COLUMNS[n % 10..n % 10 + 1], n / 10 + 1);
        let (status, answer, took) = client
            .call(
                reqwest::Method::POST,
                &format!("/v1/matches/{id}/shots"),
                Some(&players[turn].1),
                Some(json!({"cell": cell})),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        latencies.push(took);
        next[turn] += 1;
        if answer["phase"] == "finished" {
            return latencies;
        }
        turn = if answer["next_turn"] == players[0].0.as_str() {
            0
        } else {
            1
        };
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What one side of the comparison measured.
struct Figures {
    label: String,
    transactions: usize,
    seconds: f64,
    p50: Duration,
    p99: Duration,
    cpu_per_shot: Option<f64>,
    database: Work,
}

/// What PostgreSQL did for a run: WAL written, and row updates of `matches` (all, and the
/// heap-only ones that wrote no index entry).
#[derive(Clone, Copy, Default)]
struct Work {
    wal_bytes: f64,
    updates: i64,
    hot_updates: i64,
}

impl Work {
    async fn read(db: &sqlx::PgPool) -> Self {
        let (wal, updates, hot): (f64, i64, i64) = sqlx::query_as(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8,
                    coalesce((SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'matches'), 0),
                    coalesce((SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'matches'), 0)",
        )
        .fetch_one(db)
        .await
        .unwrap();
        Work {
            wal_bytes: wal,
            updates,
            hot_updates: hot,
        }
    }

    fn since(self, before: Work) -> Work {
        Work {
            wal_bytes: self.wal_bytes - before.wal_bytes,
            updates: self.updates - before.updates,
            hot_updates: self.hot_updates - before.hot_updates,
        }
    }
}

/// Busy backends report their table statistics at most once a second and idle ones after
/// ten seconds; wait that out so a reading covers everything before it.
async fn settle_statistics(db: &sqlx::PgPool) {
    tokio::time::sleep(Duration::from_secs(11)).await;
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(db)
        .await
        .unwrap();
}

impl Figures {
    fn rate(&self) -> f64 {
        self.transactions as f64 / self.seconds
    }

    fn print(&self) {
        let cpu = self
            .cpu_per_shot
            .map_or_else(|| "-".to_owned(), |cpu| format!("{:.0} µs", cpu * 1e6));
        let per = self.transactions.max(1) as f64;
        let hot = if self.database.updates > 0 {
            format!(
                "{:.0} %",
                100.0 * self.database.hot_updates as f64 / self.database.updates as f64
            )
        } else {
            "-".to_owned()
        };
        println!(
            "  {:<26} {:>7} in {:>5.1} s {:>7.0}/s  p50 {:>6.2} ms  p99 {:>6.2} ms  CPU/shot {:>6}  WAL/shot {:>5.0} B  HOT {}",
            self.label,
            self.transactions,
            self.seconds,
            self.rate(),
            self.p50.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3,
            cpu,
            self.database.wal_bytes / per,
            hot
        );
    }
}

/// Plays `connections` matches at once, `rounds` times over, and measures the shots.
async fn run_service(
    client: &std::sync::Arc<Client>,
    db: &sqlx::PgPool,
    server: u32,
    connections: usize,
    rounds: usize,
    tag: &str,
) -> Figures {
    // Set every match up first, so the CPU measured below is the shots' alone.
    let mut prepared = Vec::new();
    for round in 0..rounds {
        let setups: Vec<_> = (0..connections)
            .map(|pair| {
                let client = client.clone();
                let name = format!("{tag}-{round}-{pair}");
                tokio::spawn(async move { prepare(&client, &name).await })
            })
            .collect();
        for setup in setups {
            prepared.push(setup.await.unwrap());
        }
    }
    settle_statistics(db).await;
    // Each side starts from a checkpoint, so neither pays for the other's dirty pages.
    checkpoint(db).await;
    let work_before = Work::read(db).await;
    let cpu_before = cpu_seconds(server);
    let started = Instant::now();
    let mut queues: Vec<Vec<Ready>> = (0..connections).map(|_| Vec::new()).collect();
    for (n, ready) in prepared.into_iter().enumerate() {
        queues[n % connections].push(ready);
    }
    let tasks: Vec<_> = queues
        .into_iter()
        .map(|queue| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut all = Vec::new();
                for ready in queue {
                    all.extend(play(&client, ready).await);
                }
                all
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(server) - cpu_before;
    settle_statistics(db).await;
    let database = Work::read(db).await.since(work_before);
    latencies.sort();
    Figures {
        label: format!("statki, {connections} connections"),
        transactions: latencies.len(),
        seconds,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        cpu_per_shot: Some(cpu / latencies.len() as f64),
        database,
    }
}

/// The naive shape of one shot, one transaction each: lock the match row, insert an event
/// as large as a real `shot_fired`, write the row's deadline, sequence and snapshot.
const NAIVE_SHOT: &str = r#"
BEGIN;
SELECT m.id AS match_id, m.last_seq AS last_seq FROM matches m
  WHERE m.id = (SELECT id FROM bench_targets WHERE n = :client_id) FOR UPDATE \gset
INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
  SELECT CAST(:match_id AS uuid), :last_seq + 1, now(), NULL, 'shot_fired', payload FROM bench_payload;
UPDATE matches SET last_seq = :last_seq + 1, deadline = now() + interval '30 seconds',
       updated_at = now(), snapshot = jsonb_set(snapshot, '{version}', to_jsonb(:last_seq + 1))
  WHERE id = CAST(:match_id AS uuid);
COMMIT;
"#;

/// Runs `pgbench` with `clients` clients, each on a match row of its own.
async fn run_pgbench(url: &str, admin: &sqlx::PgPool, clients: usize, seconds: u64) -> Figures {
    sqlx::query("DROP TABLE IF EXISTS bench_targets, bench_payload")
        .execute(admin)
        .await
        .unwrap();
    sqlx::query(
        "CREATE TABLE bench_targets AS
         SELECT (row_number() OVER (ORDER BY id) - 1)::int AS n, id FROM matches",
    )
    .execute(admin)
    .await
    .unwrap();
    sqlx::query(
        "CREATE TABLE bench_payload AS
         SELECT payload FROM match_events WHERE kind = 'shot_fired' LIMIT 1",
    )
    .execute(admin)
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("statki-pgbench-{}-{clients}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("shot.sql");
    std::fs::write(&script, NAIVE_SHOT).unwrap();
    let pgbench = std::env::var("PGBENCH").unwrap_or_else(|_| "pgbench".into());
    let work_before = Work::read(admin).await;
    let output = std::process::Command::new(pgbench)
        .current_dir(&dir)
        .args(["-n", "-M", "prepared", "-l", "--log-prefix", "tx"])
        .args([
            "-c",
            &clients.to_string(),
            "-j",
            "2",
            "-T",
            &seconds.to_string(),
        ])
        .arg("-f")
        .arg(&script)
        .arg(url)
        .output()
        .expect("run pgbench (apt-get install postgresql-client)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pgbench failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Each log line: client, transaction, latency (µs), script, epoch, µs.
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("tx.")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            latencies.extend(text.lines().filter_map(|line| {
                let micros: u64 = line.split_whitespace().nth(2)?.parse().ok()?;
                Some(Duration::from_micros(micros))
            }));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    // pgbench's backends have exited, and exiting backends report their statistics.
    tokio::time::sleep(Duration::from_millis(500)).await;
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(admin)
        .await
        .unwrap();
    let database = Work::read(admin).await.since(work_before);
    latencies.sort();
    Figures {
        label: format!("pgbench, {clients} clients"),
        transactions: latencies.len(),
        seconds: seconds as f64,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        cpu_per_shot: None,
        database,
    }
}

/// The service's command batch counters from `/metrics`: decided from kept states, under
/// locks, and relocked (0 for a build without them).
async fn batch_counters(client: &Client) -> [f64; 3] {
    let text = client
        .http
        .get(format!("{}/metrics", client.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |prefix: &str| {
        text.lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    [
        value("statki_command_batches_total{decided_from=\"kept\"}"),
        value("statki_command_batches_total{decided_from=\"locked\"}"),
        value("statki_command_batches_relocked_total"),
    ]
}

async fn checkpoint(admin: &sqlx::PgPool) {
    sqlx::query("CHECKPOINT").execute(admin).await.unwrap();
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A match in play as the round-robin shooter sees it: each seat's next cell.
struct Live {
    ready: Ready,
    next: [usize; 2],
    done: bool,
}

/// Brings `count` matches to their first shot through the API, 64 at a time.
async fn fill(client: &std::sync::Arc<Client>, count: usize) -> Vec<Live> {
    let claimed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..64)
        .map(|_| {
            let client = client.clone();
            let claimed = claimed.clone();
            tokio::spawn(async move {
                let mut made = Vec::new();
                loop {
                    let n = claimed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= count {
                        return made;
                    }
                    made.push(prepare(&client, &format!("play-{n}")).await);
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(count);
    for worker in workers {
        all.extend(worker.await.unwrap().into_iter().map(|ready| Live {
            ready,
            next: [0, 0],
            done: false,
        }));
    }
    all
}

/// `pg_stat_database.deadlocks` of the bench database, once the statistics have settled.
async fn deadlocks(admin: &sqlx::PgPool) -> i64 {
    settle_statistics(admin).await;
    sqlx::query_scalar("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        .fetch_one(admin)
        .await
        .unwrap()
}

/// Fires the next shot of the seat on turn; its latency.
async fn fire(client: &Client, live: &mut Live) -> Duration {
    let turn = live.ready.turn;
    let n = live.next[turn];
    let cell = format!("{}{}", &COLUMNS[n % 10..n % 10 + 1], n / 10 + 1);
    let (status, answer, took) = client
        .call(
            reqwest::Method::POST,
            &format!("/v1/matches/{}/shots", live.ready.id),
            Some(&live.ready.players[turn].1),
            Some(json!({"cell": cell})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    live.next[turn] += 1;
    if answer["phase"] == "finished" {
        live.done = true;
    } else {
        live.ready.turn = usize::from(answer["next_turn"] != live.ready.players[0].0.as_str());
    }
    took
}

/// Each connection fires in turn at every match of its share for `seconds`.
async fn round_robin(
    client: &std::sync::Arc<Client>,
    matches: Vec<Live>,
    connections: usize,
    seconds: f64,
) -> (Vec<Live>, Vec<Duration>, f64) {
    let mut shares: Vec<Vec<Live>> = (0..connections).map(|_| Vec::new()).collect();
    for (n, live) in matches.into_iter().enumerate() {
        shares[n % connections].push(live);
    }
    let started = Instant::now();
    let tasks: Vec<_> = shares
        .into_iter()
        .map(|mut share| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                'run: loop {
                    let mut fired = false;
                    for live in share.iter_mut().filter(|live| !live.done) {
                        if started.elapsed().as_secs_f64() >= seconds {
                            break 'run;
                        }
                        latencies.push(fire(&client, live).await);
                        fired = true;
                    }
                    if !fired {
                        break;
                    }
                }
                (share, latencies)
            })
        })
        .collect();
    let mut matches = Vec::new();
    let mut latencies = Vec::new();
    for task in tasks {
        let (share, taken) = task.await.unwrap();
        matches.extend(share);
        latencies.extend(taken);
    }
    (matches, latencies, started.elapsed().as_secs_f64())
}

/// Every remaining shot of both seats of `matches`, shuffled, fired by 64 connections: the
/// statuses and latencies of all replies.
async fn hostile(
    client: &std::sync::Arc<Client>,
    matches: &[Live],
    seconds: f64,
) -> (Vec<(u16, Duration)>, f64) {
    use rand::seq::SliceRandom;
    let mut shots = Vec::new();
    for live in matches {
        for seat in 0..2 {
            for n in live.next[seat]..100 {
                let cell = format!("{}{}", &COLUMNS[n % 10..n % 10 + 1], n / 10 + 1);
                let path = format!("/v1/matches/{}/shots", live.ready.id);
                shots.push((path, live.ready.players[seat].1.clone(), cell));
            }
        }
    }
    shots.shuffle(&mut rand::rng());
    let shots = std::sync::Arc::new(shots);
    let claimed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (client, shots, claimed) = (client.clone(), shots.clone(), claimed.clone());
            tokio::spawn(async move {
                let mut replies = Vec::new();
                while started.elapsed().as_secs_f64() < seconds {
                    let n = claimed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((path, token, cell)) = shots.get(n) else {
                        break;
                    };
                    let (status, _, took) = client
                        .call(
                            reqwest::Method::POST,
                            path,
                            Some(token),
                            Some(json!({"cell": cell})),
                        )
                        .await;
                    replies.push((status, took));
                }
                replies
            })
        })
        .collect();
    let mut replies = Vec::new();
    for task in tasks {
        replies.extend(task.await.unwrap());
    }
    (replies, started.elapsed().as_secs_f64())
}

fn print_mode(label: &str, latencies: &mut [Duration], seconds: f64, deadlocks: i64) {
    latencies.sort();
    println!(
        "  {label:<34} {:>7} in {seconds:>5.1} s {:>7.0}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  deadlocks +{deadlocks}",
        latencies.len(),
        latencies.len() as f64 / seconds,
        percentile(latencies, 0.50).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
    );
}

/// The shot path with `in_play` matches in play: round-robin at each connection count, then
/// the hostile order at 64.
async fn run_in_play(
    client: &std::sync::Arc<Client>,
    admin: &sqlx::PgPool,
    in_play: usize,
    connections: &[usize],
) {
    let hostile_matches = env_or("STATKI_BENCH_HOSTILE_MATCHES", 64).min(in_play);
    let working = env_or("STATKI_BENCH_WORKING_SET", in_play).min(in_play - hostile_matches);
    let seconds = env_or("SHOTS_SECONDS", 10) as f64;
    let started = Instant::now();
    let mut matches = fill(client, in_play).await;
    let in_play_now: i64 =
        sqlx::query_scalar("SELECT count(*) FROM matches WHERE phase = 'battle'")
            .fetch_one(admin)
            .await
            .unwrap();
    println!(
        "{in_play} matches brought to their first shot in {:.0} s ({in_play_now} in battle); \
         round-robin over {working}, hostile over {hostile_matches}, {seconds} s each:",
        started.elapsed().as_secs_f64()
    );
    let hostile_set = matches.split_off(in_play - hostile_matches);
    matches.truncate(working);
    let mut before = deadlocks(admin).await;
    for &c in connections {
        let (back, mut latencies, took) = round_robin(client, matches, c, seconds).await;
        matches = back;
        let after = deadlocks(admin).await;
        print_mode(
            &format!("round-robin, {c} connections"),
            &mut latencies,
            took,
            after - before,
        );
        before = after;
    }
    let (replies, took) = hostile(client, &hostile_set, seconds).await;
    let after = deadlocks(admin).await;
    let accepted = replies.iter().filter(|(status, _)| *status == 200).count();
    let refused = replies.iter().filter(|(status, _)| *status == 409).count();
    let mut latencies: Vec<Duration> = replies.iter().map(|(_, took)| *took).collect();
    print_mode(
        "hostile shuffled, 64 connections",
        &mut latencies,
        took,
        after - before,
    );
    println!(
        "    of those {accepted} accepted ({:.0}/s), {refused} refused 409 (out of turn), {} other",
        accepted as f64 / took,
        replies.len() - accepted - refused
    );
}

#[tokio::main]
async fn main() {
    let base_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let database = format!("statki_bench_{}", std::process::id());
    let url = match base_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{database}"),
        None => panic!("DATABASE_URL needs a database path"),
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // STATKI_BIN runs another build of the service (e.g. an earlier commit's) in the same
    // harness, for before/after figures.
    let binary =
        std::env::var("STATKI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_statki").to_owned());
    let in_play = env_or("STATKI_BENCH_IN_PLAY", 0);
    let mut command = std::process::Command::new(&binary);
    if in_play > 0 {
        // Filling takes longer than a turn clock: no match may time out meanwhile.
        command
            .env("STATKI_PLACEMENT_SECONDS", "36000")
            .env("STATKI_SHOT_SECONDS", "36000");
    }
    let mut server = command
        .env("DATABASE_URL", &url)
        .env("STATKI_LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "STATKI_JWT_SECRET",
            "bench-secret-bench-secret-bench-secret",
        )
        .env("STATKI_RATE_LIMITS", "false")
        .env("STATKI_METRICS_OPEN", "true")
        .env("STATKI_DB_POOL", "16")
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start statki");
    let client = Client {
        http: reqwest::Client::new(),
        base: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..100 {
        if client
            .http
            .get(format!("{}/readyz", client.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let connections: Vec<usize> = std::env::var("SHOTS_CONNECTIONS")
        .unwrap_or_else(|_| "8,64".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let rounds = env_or("SHOTS_ROUNDS", 3);
    let pgbench_seconds = env_or("SHOTS_PGBENCH_SECONDS", 10) as u64;
    let client = std::sync::Arc::new(client);
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .expect("bench database");
    let repeats = env_or("SHOTS_REPEATS", 3).max(1);
    if in_play > 0 {
        run_in_play(&client, &admin, in_play, &connections).await;
    }
    for &c in connections.iter().filter(|_| in_play == 0) {
        let batches_before = batch_counters(&client).await;
        let mut runs = Vec::with_capacity(repeats);
        for run in 1..=repeats {
            let tag = format!("c{c}r{run}");
            let service = run_service(&client, &admin, server.id(), c, rounds, &tag).await;
            checkpoint(&admin).await;
            let naive = run_pgbench(&url, &admin, c, pgbench_seconds).await;
            println!(
                "shot path, {c} connections, run {run} of {repeats} ({rounds} matches each for statki):"
            );
            service.print();
            naive.print();
            println!(
                "  ratio statki/pgbench         {:.2}×",
                service.rate() / naive.rate()
            );
            runs.push((service, naive));
        }
        let service_rate = median(runs.iter().map(|(service, _)| service.rate()));
        let naive_rate = median(runs.iter().map(|(_, naive)| naive.rate()));
        let p99 = median(
            runs.iter()
                .map(|(service, _)| service.p99.as_secs_f64() * 1e3),
        );
        let cpu = median(
            runs.iter()
                .filter_map(|(service, _)| service.cpu_per_shot.map(|cpu| cpu * 1e6)),
        );
        let batches = batch_counters(&client).await;
        println!(
            "  command batches: {} decided from kept states, {} under locks, {} relocked",
            batches[0] - batches_before[0],
            batches[1] - batches_before[1],
            batches[2] - batches_before[2],
        );
        println!(
            "shot path, {c} connections, median of {repeats} runs: statki {service_rate:.0}/s \
             (p99 {p99:.2} ms, CPU/shot {cpu:.0} µs), pgbench {naive_rate:.0}/s, \
             ratio {:.2}×",
            service_rate / naive_rate
        );
    }
    admin.close().await;
    server.kill().ok();
    server.wait().ok();
    let admin = sqlx::PgPool::connect(&base_url)
        .await
        .expect("admin connection");
    let drop = format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(&admin)
        .await
        .ok();
}
