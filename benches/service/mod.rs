//! What the load generators share: the `statki` binary started on a database of its own, an
//! HTTP client for it, matches brought to their first shot and fired at round-robin, latency
//! percentiles, and `pgbench` running the naive transaction shape of a shot beside it.
// Each benchmark uses its own part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

// The integration tests' fleets: one legal fleet per preset for tests and benches alike.
#[path = "../../tests/it/fleets.rs"]
mod fleets;

pub const COLUMNS: &str = "ABCDEFGHIJ";

pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let after_name = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
}

impl Client {
    pub async fn call(
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

pub async fn register(client: &Client, name: &str) -> (String, String) {
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

pub struct Ready {
    pub id: String,
    pub players: [(String, String); 2],
    pub turn: usize,
}

/// Registers two players and brings a match to its first shot.
pub async fn prepare(client: &Client, name: &str) -> Ready {
    let a = register(client, &format!("a-{name}")).await;
    prepare_for(client, a, name, json!({})).await
}

/// Brings a match of player `a` (id, token) against a newly registered one, created with
/// `settings` (`{"ranked": true}`, say), to its first shot.
pub async fn prepare_for(
    client: &Client,
    a: (String, String),
    name: &str,
    settings: Value,
) -> Ready {
    let b = register(client, &format!("b-{name}")).await;
    let (status, created, _) = client
        .call(
            reqwest::Method::POST,
            "/v1/matches",
            Some(&a.1),
            Some(settings.clone()),
        )
        .await;
    assert_eq!(status, 201, "creating a match: {created}");
    let id = created["id"].as_str().unwrap().to_owned();
    client
        .call(
            reqwest::Method::POST,
            &format!("/v1/matches/{id}/join"),
            Some(&b.1),
            None,
        )
        .await;
    let fleet = fleets::legal_fleet(settings_ruleset(&settings));
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

/// The rule set a match's `settings` ask for (the default when they name none).
fn settings_ruleset(settings: &Value) -> &str {
    settings["ruleset"].as_str().unwrap_or("statki")
}

/// Plays a prepared match to the end (both sides shoot row by row): the shot latencies.
pub async fn play(client: &Client, ready: Ready) -> Vec<Duration> {
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
        next[turn] += 1;
        // A `classic` sink marks the cells around the ship, which are then not shot at.
        if status == 409 && answer["code"] == "already_known" {
            continue;
        }
        assert_eq!(status, 200, "{answer}");
        latencies.push(took);
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

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What one side of the comparison measured.
pub struct Figures {
    pub label: String,
    pub transactions: usize,
    pub seconds: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub cpu_per_shot: Option<f64>,
    pub database: Work,
    /// CPU time per transaction of each database node's processes (name, seconds).
    pub nodes_cpu: Vec<(String, f64)>,
}

/// What PostgreSQL did for a run: WAL written, and row updates of `matches` (all, and the
/// heap-only ones that wrote no index entry).
#[derive(Clone, Copy, Default)]
pub struct Work {
    pub wal_bytes: f64,
    pub updates: i64,
    pub hot_updates: i64,
    /// Two-phase commits recorded in Citus's `pg_dist_transaction` (0 on plain PostgreSQL).
    pub two_phase: i64,
}

impl Work {
    /// On Citus the WAL of every node and the row updates of every shard of `matches`.
    pub async fn read(db: &sqlx::PgPool) -> Self {
        let (wal, updates, hot): (f64, i64, i64) = sqlx::query_as(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8,
                    coalesce((SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'matches'), 0),
                    coalesce((SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'matches'), 0)",
        )
        .fetch_one(db)
        .await
        .unwrap();
        let mut work = Work {
            wal_bytes: wal,
            updates,
            hot_updates: hot,
            two_phase: 0,
        };
        if citus(db).await {
            // Each shard of `matches` on its worker: "updates,heap-only updates".
            let (wal, updates, hot, two_phase): (f64, i64, i64, i64) = sqlx::query_as(
                "WITH shards AS (
                     SELECT result FROM run_command_on_shards('matches',
                         $$SELECT coalesce(n_tup_upd, 0) || ',' || coalesce(n_tup_hot_upd, 0)
                           FROM pg_stat_user_tables WHERE relid = '%s'::regclass$$)
                     WHERE success)
                 SELECT (SELECT coalesce(sum(result::float8), 0)::float8
                         FROM run_command_on_workers(
                             $$SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')$$)
                         WHERE success),
                        (SELECT coalesce(sum(split_part(result, ',', 1)::int8), 0)::int8
                         FROM shards),
                        (SELECT coalesce(sum(split_part(result, ',', 2)::int8), 0)::int8
                         FROM shards),
                        (SELECT count(*) FROM pg_dist_transaction)",
            )
            .fetch_one(db)
            .await
            .unwrap();
            work.wal_bytes += wal;
            work.updates += updates;
            work.hot_updates += hot;
            work.two_phase = two_phase;
        }
        work
    }

    pub fn since(self, before: Work) -> Work {
        Work {
            wal_bytes: self.wal_bytes - before.wal_bytes,
            updates: self.updates - before.updates,
            hot_updates: self.hot_updates - before.hot_updates,
            two_phase: self.two_phase - before.two_phase,
        }
    }
}

/// Busy backends report their table statistics at most once a second and idle ones after
/// ten seconds; wait that out so a reading covers everything before it.
pub async fn settle_statistics(db: &sqlx::PgPool) {
    tokio::time::sleep(Duration::from_secs(11)).await;
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(db)
        .await
        .unwrap();
}

impl Figures {
    pub fn rate(&self) -> f64 {
        self.transactions as f64 / self.seconds
    }

    pub fn print(&self) {
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
        if !self.nodes_cpu.is_empty() {
            let nodes: Vec<String> = self
                .nodes_cpu
                .iter()
                .map(|(name, cpu)| format!("{name} {:.0} µs", cpu * 1e6))
                .collect();
            println!(
                "  {:<26} database CPU/shot: {}, two-phase commits +{}",
                "",
                nodes.join(", "),
                self.database.two_phase
            );
        }
    }
}

/// The naive shape of one shot, one transaction each: lock the match row, insert an event
/// as large as a real `shot_fired`, write the row's deadline, sequence and snapshot.
pub const NAIVE_SHOT: &str = r#"
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

/// [`NAIVE_SHOT`] in the form Citus routes to one worker (its `FOR UPDATE` names the
/// match by id, not by a subquery, and the event's payload is a value, not a read of a
/// coordinator table): the client's match and the payload are read first, outside the
/// transaction, one statement more than [`NAIVE_SHOT`]. Used on Citus, and on plain
/// PostgreSQL with `SHOTS_PGBENCH_ROUTED=1` so both run the same script.
pub const NAIVE_SHOT_ROUTED: &str = r#"
SELECT t.id AS match_id, p.payload AS payload FROM bench_targets t, bench_payload p
  WHERE t.n = :client_id \gset
BEGIN;
SELECT last_seq FROM matches WHERE id = CAST(:match_id AS uuid) FOR UPDATE \gset
INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
  VALUES (CAST(:match_id AS uuid), :last_seq + 1, now(), NULL, 'shot_fired', CAST(:payload AS jsonb));
UPDATE matches SET last_seq = :last_seq + 1, deadline = now() + interval '30 seconds',
       updated_at = now(), snapshot = jsonb_set(snapshot, '{version}', to_jsonb(:last_seq + 1))
  WHERE id = CAST(:match_id AS uuid);
COMMIT;
"#;

/// Runs `pgbench` with `clients` clients, each on a match row of its own.
pub async fn run_pgbench(url: &str, admin: &sqlx::PgPool, clients: usize, seconds: u64) -> Figures {
    sqlx::query("DROP TABLE IF EXISTS bench_targets, bench_payload")
        .execute(admin)
        .await
        .unwrap();
    sqlx::query(
        // Matches in battle first: with a history of finished ones, the naive shots go to
        // rows as hot as the service's.
        "CREATE TABLE bench_targets AS
         SELECT (row_number() OVER (ORDER BY battle DESC, id) - 1)::int AS n, id
         FROM (SELECT id, phase = 'battle' AS battle FROM matches
               ORDER BY phase = 'battle' DESC, id LIMIT 10000) AS t",
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
    let routed = std::env::var("SHOTS_PGBENCH_ROUTED").is_ok_and(|v| v == "1");
    let routed = routed || citus(admin).await;
    std::fs::write(
        &script,
        if routed {
            NAIVE_SHOT_ROUTED
        } else {
            NAIVE_SHOT
        },
    )
    .unwrap();
    let pgbench = std::env::var("PGBENCH").unwrap_or_else(|_| "pgbench".into());
    let nodes = database_nodes(admin).await;
    let work_before = Work::read(admin).await;
    let cpu_before = nodes_cpu_seconds(&nodes);
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
    let cpu_after = nodes_cpu_seconds(&nodes);
    let database = Work::read(admin).await.since(work_before);
    latencies.sort();
    Figures {
        label: format!(
            "pgbench, {clients} clients{}",
            if routed { " (routed)" } else { "" }
        ),
        transactions: latencies.len(),
        seconds: seconds as f64,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        cpu_per_shot: None,
        nodes_cpu: nodes_cpu_per(&nodes, &cpu_before, &cpu_after, latencies.len()),
        database,
    }
}

/// A checkpoint of the server, and on Citus of every worker too.
pub async fn checkpoint(admin: &sqlx::PgPool) {
    sqlx::query("CHECKPOINT").execute(admin).await.unwrap();
    if citus(admin).await {
        sqlx::query("SELECT run_command_on_workers('CHECKPOINT')")
            .execute(admin)
            .await
            .unwrap();
    }
}

/// Whether the database is a Citus one (the extension exists in it).
pub async fn citus(db: &sqlx::PgPool) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
        .fetch_one(db)
        .await
        .unwrap()
}

/// The database's nodes running on this machine, by name and postmaster process id: the
/// server itself ("database", or "coordinator" on Citus) and each Citus worker, each found
/// through its data directory's `postmaster.pid`. Nodes whose directory is not readable here
/// (another machine, no superuser) are left out.
pub async fn database_nodes(admin: &sqlx::PgPool) -> Vec<(String, u32)> {
    let mut dirs = Vec::new();
    let citus = citus(admin).await;
    if let Ok(dir) = sqlx::query_scalar::<_, String>("SELECT current_setting('data_directory')")
        .fetch_one(admin)
        .await
    {
        dirs.push((
            if citus { "coordinator" } else { "database" }.to_owned(),
            dir,
        ));
    }
    if citus {
        let workers: Vec<(i32, String)> = sqlx::query_as(
            "SELECT nodeport, result FROM run_command_on_workers(
                 $$SELECT current_setting('data_directory')$$)
             WHERE success ORDER BY nodeport",
        )
        .fetch_all(admin)
        .await
        .unwrap_or_default();
        dirs.extend(
            workers
                .into_iter()
                .map(|(port, dir)| (format!("worker :{port}"), dir)),
        );
    }
    dirs.into_iter()
        .filter_map(|(name, dir)| {
            let pid = std::fs::read_to_string(format!("{dir}/postmaster.pid")).ok()?;
            Some((name, pid.lines().next()?.trim().parse().ok()?))
        })
        .collect()
}

/// CPU time (user + system, seconds) of a PostgreSQL server: its postmaster, every living
/// child (backends, background workers) and the children that have exited (the postmaster's
/// `cutime`/`cstime`), so a difference of two readings is the server's CPU in between.
pub fn server_cpu_seconds(postmaster: u32) -> f64 {
    let fields = |pid: &str| -> Option<Vec<String>> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after_name = &stat[stat.rfind(')')? + 2..];
        Some(after_name.split_whitespace().map(str::to_owned).collect())
    };
    let ticks = |fields: &[String], from: usize, to: usize| -> f64 {
        fields[from..=to]
            .iter()
            .filter_map(|field| field.parse::<f64>().ok())
            .sum()
    };
    let Some(own) = fields(&postmaster.to_string()) else {
        return 0.0;
    };
    // utime, stime, cutime, cstime are fields 14-17 of stat, 11-14 after the name.
    let mut total = ticks(&own, 11, 14);
    let parent = postmaster.to_string();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Some(child) = fields(&name)
            && child.get(1) == Some(&parent)
        {
            total += ticks(&child, 11, 12);
        }
    }
    total / 100.0
}

/// [`server_cpu_seconds`] of every node of `nodes`.
pub fn nodes_cpu_seconds(nodes: &[(String, u32)]) -> Vec<f64> {
    nodes
        .iter()
        .map(|(_, pid)| server_cpu_seconds(*pid))
        .collect()
}

/// Per transaction, the CPU each node spent between two readings.
pub fn nodes_cpu_per(
    nodes: &[(String, u32)],
    before: &[f64],
    after: &[f64],
    transactions: usize,
) -> Vec<(String, f64)> {
    nodes
        .iter()
        .zip(before.iter().zip(after))
        .map(|((name, _), (before, after))| {
            (name.clone(), (after - before) / transactions.max(1) as f64)
        })
        .collect()
}

pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A match in play as the round-robin shooter sees it: each seat's next cell.
pub struct Live {
    pub ready: Ready,
    pub next: [usize; 2],
    pub done: bool,
}

/// Brings `count` matches to their first shot through the API, 64 at a time.
pub async fn fill(client: &std::sync::Arc<Client>, count: usize) -> Vec<Live> {
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
pub async fn deadlocks(admin: &sqlx::PgPool) -> i64 {
    settle_statistics(admin).await;
    let here: i64 = sqlx::query_scalar(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(admin)
    .await
    .unwrap();
    if !citus(admin).await {
        return here;
    }
    // And on every worker, where the shards' row locks are taken.
    let workers: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(result::int8), 0)::int8 FROM run_command_on_workers(
             $$SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()$$)
         WHERE success",
    )
    .fetch_one(admin)
    .await
    .unwrap();
    here + workers
}

/// Fires the next shot of the seat on turn; its latency.
pub async fn fire(client: &Client, live: &mut Live) -> Duration {
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
pub async fn round_robin(
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

pub fn print_mode(label: &str, latencies: &mut [Duration], seconds: f64, deadlocks: i64) {
    latencies.sort();
    println!(
        "  {label:<34} {:>7} in {seconds:>5.1} s {:>7.0}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  deadlocks +{deadlocks}",
        latencies.len(),
        latencies.len() as f64 / seconds,
        percentile(latencies, 0.50).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
    );
}

/// A `statki` server on a free port of loopback, on the database at `url` (created and
/// migrated by the server), with rate limits off and metrics open; `env` adds settings.
pub struct Server {
    pub process: std::process::Child,
    pub client: std::sync::Arc<Client>,
}

impl Server {
    pub async fn start(url: &str, env: &[(&str, &str)]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // STATKI_BIN runs another build of the service (e.g. an earlier commit's) in the
        // same harness, for before/after figures.
        let binary =
            std::env::var("STATKI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_statki").to_owned());
        let mut command = std::process::Command::new(&binary);
        command
            .env("DATABASE_URL", url)
            .env("STATKI_LISTEN", format!("127.0.0.1:{port}"))
            .env("STATKI_JWT_SECRET", JWT_SECRET)
            .env("STATKI_RATE_LIMITS", "false")
            .env("STATKI_METRICS_OPEN", "true")
            .env("STATKI_DB_POOL", "16")
            .env("RUST_LOG", "warn");
        for (name, value) in env {
            command.env(name, value);
        }
        let process = command.spawn().expect("start statki");
        let client = Client {
            http: reqwest::Client::new(),
            base: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..600 {
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
        Server {
            process,
            client: std::sync::Arc::new(client),
        }
    }

    pub fn stop(mut self) {
        self.process.kill().ok();
        self.process.wait().ok();
    }
}

/// The token secret every benchmark server signs with.
pub const JWT_SECRET: &str = "bench-secret-bench-secret-bench-secret";

/// The URL of database `name` on the server of `base_url`.
pub fn database_url(base_url: &str, name: &str) -> String {
    match base_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => panic!("DATABASE_URL needs a database path"),
    }
}

/// Drops database `name` of the server of `base_url`.
pub async fn drop_database(base_url: &str, name: &str) {
    let admin = sqlx::PgPool::connect(base_url)
        .await
        .expect("admin connection");
    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(&admin)
        .await
        .ok();
}
