//! The fault campaign: simulated players play many matches through two replicas while
//! database connections are terminated, a replica is killed with SIGKILL and restarted,
//! and PostgreSQL (a private cluster started here) is restarted and paused. Afterwards
//! SQL and the API check that every acknowledged move is stored exactly once, `statki
//! verify` finds every match consistent with its log, and clocks were still enforced.
//!
//! `attacks_leave_a_victim_served` then runs the attacks of the second hardening round
//! against one replica with default settings, each beside a victim reading its match, and
//! prints the victim's p99 during each.
//!
//! It takes about a minute, so `cargo test` skips it; `scripts/checks/fault-campaign`
//! runs it and prints its figures:
//! `cargo test --test it fault_campaign:: -- --ignored --nocapture`.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use embedded_pg::EmbeddedPostgres;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const SECRET: &str = "fault-campaign-secret-of-at-least-32-bytes";
const PAIRS: usize = 6;
const PLAY_SECONDS: u64 = 45;

/// A replica process on a fixed port.
struct Replica {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Replica {
    async fn start(&mut self, database_url: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_statki"))
            .env("DATABASE_URL", database_url)
            .env("STATKI_LISTEN", format!("127.0.0.1:{}", self.port))
            .env("STATKI_JWT_SECRET", SECRET)
            .env("STATKI_RATE_LIMITS", "false")
            .env("STATKI_DB_POOL", "8")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(response) = client
                .get(format!("http://127.0.0.1:{}/readyz", self.port))
                .send()
                .await
                && response.status() == StatusCode::OK
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("replica on {} never became ready", self.port);
    }

    /// SIGKILL: no graceful shutdown, requests in flight are cut.
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.unwrap();
        }
    }
}

#[derive(Default)]
struct Figures {
    acknowledged: AtomicU64,
    retries: AtomicU64,
    matches_finished: AtomicU64,
}

/// A client that, like a well-behaved one, spreads requests over the replicas and retries
/// a failed state change with the same `Idempotency-Key`.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    bases: Arc<Vec<String>>,
    next: Arc<AtomicU64>,
    figures: Arc<Figures>,
}

enum Outcome {
    Ok(Value),
    Refused(StatusCode, Value),
}

impl Client {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> Outcome {
        for _ in 0..600 {
            let turn = self.next.fetch_add(1, Ordering::Relaxed) as usize;
            let base = &self.bases[turn % self.bases.len()];
            let mut request = self
                .http
                .request(method.clone(), format!("{base}{path}"))
                .timeout(Duration::from_secs(20));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            if let Some(key) = key {
                request = request.header("idempotency-key", key);
            }
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    let value = response.json().await.unwrap_or(Value::Null);
                    return Outcome::Ok(value);
                }
                Ok(response) if response.status().is_client_error() => {
                    let status = response.status();
                    let value: Value = response.json().await.unwrap_or(Value::Null);
                    if value["code"] == "idempotency_key_in_progress" {
                        // The first attempt is still running (or its replica died and
                        // its transaction is being rolled back): ask again shortly.
                    } else {
                        return Outcome::Refused(status, value);
                    }
                }
                // 5xx, or no answer at all: the request may or may not have happened.
                Ok(_) | Err(_) => {}
            }
            self.figures.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{method} {path} never got through");
    }

    async fn register(&self, name: &str) -> (String, String) {
        // Registration takes no key: a lost answer is retried under a fresh name.
        for attempt in 0.. {
            let body = json!({ "name": format!("{name}-{attempt}") });
            match self
                .call(
                    reqwest::Method::POST,
                    "/v1/players",
                    None,
                    Some(&body),
                    None,
                )
                .await
            {
                Outcome::Ok(created) => {
                    return (
                        created["id"].as_str().unwrap().to_owned(),
                        created["token"].as_str().unwrap().to_owned(),
                    );
                }
                Outcome::Refused(..) => continue,
            }
        }
        unreachable!()
    }
}

/// One acknowledged shot: match, shooter, cell.
type Ack = (String, String, String);

/// Two players playing match after match until `stop`.
async fn play(client: Client, pair: usize, stop: Arc<AtomicBool>) -> Vec<Ack> {
    let players = [
        client.register(&format!("a{pair}")).await,
        client.register(&format!("b{pair}")).await,
    ];
    let fleet = common::legal_fleet("statki");
    let mut fleet_first = common::legal_fleet_cells("statki");
    let all: Vec<String> = statki::engine::Cell::all().map(|c| c.to_string()).collect();
    let rest: Vec<String> = all
        .iter()
        .filter(|c| !fleet_first.contains(c))
        .cloned()
        .collect();
    fleet_first.extend(rest);
    let mut misses_first: Vec<String> = all.clone();
    misses_first.reverse();
    let orders = [fleet_first, misses_first];
    let mut acks = Vec::new();
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let created = match client
            .call(
                reqwest::Method::POST,
                "/v1/matches",
                Some(&players[0].1),
                Some(&json!({})),
                Some(&format!("create-{pair}-{round}")),
            )
            .await
        {
            Outcome::Ok(created) => created,
            Outcome::Refused(status, body) => panic!("create: {status} {body}"),
        };
        let id = created["id"].as_str().unwrap().to_owned();
        let path = format!("/v1/matches/{id}");
        if let Outcome::Refused(status, body) = client
            .call(
                reqwest::Method::POST,
                &format!("{path}/join"),
                Some(&players[1].1),
                Some(&json!({})),
                Some(&format!("join-{id}")),
            )
            .await
        {
            panic!("join: {status} {body}");
        }
        for (seat, (_, token)) in players.iter().enumerate() {
            if let Outcome::Refused(status, body) = client
                .call(
                    reqwest::Method::PUT,
                    &format!("{path}/fleet"),
                    Some(token),
                    Some(&fleet),
                    Some(&format!("fleet-{id}-{seat}")),
                )
                .await
            {
                panic!("fleet: {status} {body}");
            }
        }
        let view = match client
            .call(reqwest::Method::GET, &path, Some(&players[0].1), None, None)
            .await
        {
            Outcome::Ok(view) => view,
            Outcome::Refused(status, body) => panic!("view: {status} {body}"),
        };
        let mut turn = usize::from(view["turn"].as_str() != Some(players[0].0.as_str()));
        let mut next = [0usize, 0usize];
        loop {
            let (shooter, token) = &players[turn];
            let cell = &orders[turn][next[turn]];
            let outcome = client
                .call(
                    reqwest::Method::POST,
                    &format!("{path}/shots"),
                    Some(token),
                    Some(&json!({ "cell": cell })),
                    Some(&format!("shot-{id}-{turn}-{cell}")),
                )
                .await;
            match outcome {
                Outcome::Ok(answer) => {
                    acks.push((id.clone(), shooter.clone(), cell.clone()));
                    client.figures.acknowledged.fetch_add(1, Ordering::Relaxed);
                    next[turn] += 1;
                    if answer["phase"] == "finished" {
                        client
                            .figures
                            .matches_finished
                            .fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    turn = usize::from(answer["next_turn"].as_str() != Some(players[0].0.as_str()));
                }
                Outcome::Refused(status, body) => {
                    // A shot clock ran out while the database was away: the match is over.
                    assert_eq!(body["code"], "wrong_phase", "shot: {status} {body}");
                    break;
                }
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
    }
    acks
}

/// The postmaster and its children, for pausing the whole cluster.
fn cluster_pids(data_dir: &Path) -> Vec<i32> {
    let pid_file = std::fs::read_to_string(data_dir.join("postmaster.pid")).unwrap();
    let postmaster: i32 = pid_file.lines().next().unwrap().trim().parse().unwrap();
    let mut pids = vec![postmaster];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The parent pid is the second field after the parenthesised command name.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<i32>().ok());
        if parent == Some(postmaster) {
            pids.push(pid);
        }
    }
    pids
}

fn signal(pids: &[i32], name: &str) {
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status();
    }
}

async fn terminate_connections(url: &str) -> u64 {
    let Ok(pool) = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
    else {
        return 0;
    };
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    pool.close().await;
    killed.into_iter().filter(|k| *k).count() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a minute of faults; run by scripts/checks/fault-campaign"]
async fn faults_under_load_lose_and_duplicate_no_acknowledged_move() {
    let root = std::env::temp_dir().join(format!("statki-fault-campaign-{}", std::process::id()));
    let data_dir = root.join("data");
    let cluster = EmbeddedPostgres::start(&data_dir).await.unwrap();
    let url = cluster.database_url();
    let mut cluster = Some(cluster);
    let mut replicas: Vec<Replica> = (0..2)
        .map(|n| Replica {
            port: common::free_port(),
            child: None,
            log: root.join(format!("replica-{n}.log")),
        })
        .collect();
    for replica in &mut replicas {
        replica.start(&url).await;
    }
    let figures = Arc::new(Figures::default());
    let client = Client {
        http: reqwest::Client::new(),
        bases: Arc::new(
            replicas
                .iter()
                .map(|r| format!("http://127.0.0.1:{}", r.port))
                .collect(),
        ),
        next: Arc::new(AtomicU64::new(0)),
        figures: figures.clone(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let players: Vec<_> = (0..PAIRS)
        .map(|pair| tokio::spawn(play(client.clone(), pair, stop.clone())))
        .collect();

    // Short-clock matches nobody plays, created as faults happen: their clocks must run
    // out and be enforced all the same.
    let referee = client.register("referee").await;
    let rival = client.register("rival").await;
    let mut clocked = Vec::new();
    let open_clocked = async |client: &Client, n: usize| -> String {
        let created = client
            .call(
                reqwest::Method::POST,
                "/v1/matches",
                Some(&referee.1),
                Some(&json!({ "clock": { "placement_seconds": 5, "shot_seconds": 2 } })),
                Some(&format!("clocked-{n}")),
            )
            .await;
        let Outcome::Ok(created) = created else {
            panic!("clocked match refused")
        };
        let id = created["id"].as_str().unwrap().to_owned();
        let _ = client
            .call(
                reqwest::Method::POST,
                &format!("/v1/matches/{id}/join"),
                Some(&rival.1),
                Some(&json!({})),
                Some(&format!("clocked-join-{n}")),
            )
            .await;
        id
    };

    let started = Instant::now();
    let at =
        |seconds: u64| tokio::time::sleep_until((started + Duration::from_secs(seconds)).into());
    let mut terminated = 0;
    let mut faults = Vec::new();

    at(4).await;
    clocked.push(open_clocked(&client, 0).await);
    for _ in 0..3 {
        terminated += terminate_connections(&url).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    faults.push(format!(
        "{:>4.1}s terminated database connections",
        started.elapsed().as_secs_f64()
    ));

    at(9).await;
    replicas[1].kill().await;
    faults.push(format!(
        "{:>4.1}s SIGKILL replica 1",
        started.elapsed().as_secs_f64()
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    replicas[1].start(&url).await;
    faults.push(format!(
        "{:>4.1}s replica 1 back",
        started.elapsed().as_secs_f64()
    ));
    clocked.push(open_clocked(&client, 1).await);

    at(18).await;
    cluster.take().unwrap().stop().await.unwrap();
    faults.push(format!(
        "{:>4.1}s PostgreSQL stopped",
        started.elapsed().as_secs_f64()
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster = Some(EmbeddedPostgres::start(&data_dir).await.unwrap());
    faults.push(format!(
        "{:>4.1}s PostgreSQL restarted",
        started.elapsed().as_secs_f64()
    ));
    clocked.push(open_clocked(&client, 2).await);

    at(27).await;
    let paused = cluster_pids(&data_dir);
    signal(&paused, "STOP");
    faults.push(format!(
        "{:>4.1}s PostgreSQL paused ({} processes)",
        started.elapsed().as_secs_f64(),
        paused.len()
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    signal(&paused, "CONT");
    faults.push(format!(
        "{:>4.1}s PostgreSQL resumed",
        started.elapsed().as_secs_f64()
    ));

    at(33).await;
    replicas[0].kill().await;
    faults.push(format!(
        "{:>4.1}s SIGKILL replica 0",
        started.elapsed().as_secs_f64()
    ));
    for _ in 0..3 {
        terminated += terminate_connections(&url).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    replicas[0].start(&url).await;
    faults.push(format!(
        "{:>4.1}s replica 0 back",
        started.elapsed().as_secs_f64()
    ));
    clocked.push(open_clocked(&client, 3).await);

    at(PLAY_SECONDS).await;
    stop.store(true, Ordering::Relaxed);
    let mut acks = Vec::new();
    for player in players {
        acks.extend(player.await.unwrap());
    }
    // Every clocked match's placement clock (5 s) has run out by now.
    tokio::time::sleep(Duration::from_secs(7)).await;

    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .unwrap();
    let stored: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT match_id::text, payload->>'player', payload->>'cell'
         FROM match_events WHERE kind = 'shot_fired'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut copies: HashMap<Ack, u64> = HashMap::new();
    for shot in stored {
        *copies.entry(shot).or_default() += 1;
    }
    let lost = acks.iter().filter(|ack| !copies.contains_key(*ack)).count();
    let duplicated: u64 = copies.values().map(|n| n - 1).sum();
    let acknowledged: std::collections::HashSet<&Ack> = acks.iter().collect();
    let unacknowledged = copies
        .keys()
        .filter(|shot| !acknowledged.contains(shot))
        .count();
    let reasons: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT phase, reason FROM matches WHERE id = ANY($1::uuid[])")
            .bind(&clocked)
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;

    let verify = Command::new(env!("CARGO_BIN_EXE_statki"))
        .arg("verify")
        .env("DATABASE_URL", &url)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    let verify_report = String::from_utf8_lossy(&verify.stdout).into_owned();

    println!("fault campaign: {PAIRS} pairs of players, two replicas, {PLAY_SECONDS} s of play");
    for fault in &faults {
        println!("  {fault}");
    }
    println!("  database connections terminated: {terminated}");
    println!(
        "  matches finished: {}",
        figures.matches_finished.load(Ordering::Relaxed)
    );
    println!("  moves acknowledged: {}", acks.len());
    println!("  moves lost: {lost}");
    println!("  moves duplicated: {duplicated}");
    println!("  moves stored without an acknowledgement: {unacknowledged}");
    println!("  retries: {}", figures.retries.load(Ordering::Relaxed));
    println!(
        "  short clocks enforced: {}/{}",
        reasons
            .iter()
            .filter(|(phase, reason)| phase == "finished"
                && reason.as_deref() == Some("both_placement_timeout"))
            .count(),
        clocked.len()
    );
    println!(
        "  statki verify: {}",
        verify_report.lines().last().unwrap_or_default()
    );

    for replica in &mut replicas {
        replica.kill().await;
    }
    if let Some(cluster) = cluster {
        cluster.stop().await.unwrap();
    }

    assert!(acks.len() > 500, "too few moves to prove anything");
    assert!(
        figures.retries.load(Ordering::Relaxed) > 0,
        "no fault was felt"
    );
    assert_eq!(lost, 0, "acknowledged moves lost");
    assert_eq!(duplicated, 0, "moves stored twice");
    assert_eq!(reasons.len(), clocked.len());
    for (phase, reason) in &reasons {
        assert_eq!(phase, "finished");
        assert_eq!(reason.as_deref(), Some("both_placement_timeout"));
    }
    assert!(verify.status.success(), "statki verify:\n{verify_report}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A replica with the default settings (rate limits on, /metrics closed), as attacked.
async fn start_default_replica(port: u16, database_url: &str, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_statki"))
        .env("DATABASE_URL", database_url)
        .env("STATKI_LISTEN", format!("127.0.0.1:{port}"))
        .env("STATKI_JWT_SECRET", SECRET)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if let Ok(response) = client
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
            && response.status() == StatusCode::OK
        {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("replica on {port} never became ready");
}

/// A client whose connections come from `address` (a loopback address of its own), so each
/// attacker and the victim have their own per-address budgets, as on a real network.
fn client_from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(address.parse().unwrap()))
        .build()
        .unwrap()
}

/// The victim reads its match every 20 ms until `stop`; returns the latencies and the
/// answers that were not 200.
async fn victim(
    http: reqwest::Client,
    url: String,
    token: String,
    stop: Arc<AtomicBool>,
) -> (Vec<Duration>, u64) {
    let mut latencies = Vec::new();
    let mut failed = 0;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let answer = http.get(&url).bearer_auth(&token).send().await;
        latencies.push(started.elapsed());
        if !answer.is_ok_and(|a| a.status() == StatusCode::OK) {
            failed += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (latencies, failed)
}

fn p99(latencies: &mut [Duration]) -> Duration {
    latencies.sort();
    latencies
        .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

async fn register_from(http: &reqwest::Client, base: &str, name: &str) -> (String, String) {
    let answer: Value = http
        .post(format!("{base}/v1/players"))
        .json(&json!({ "name": name, "password": "the right password" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        answer["id"].as_str().unwrap().to_owned(),
        answer["token"].as_str().unwrap().to_owned(),
    )
}

/// Runs `attack` for `seconds` beside the victim; prints the victim's p99.
async fn during<F: Future<Output = String>>(
    name: &str,
    victim_http: &reqwest::Client,
    victim_url: &str,
    victim_token: &str,
    attack: impl FnOnce(Arc<AtomicBool>) -> F,
) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let watching = tokio::spawn(victim(
        victim_http.clone(),
        victim_url.to_owned(),
        victim_token.to_owned(),
        stop.clone(),
    ));
    let report = attack(stop.clone()).await;
    stop.store(true, Ordering::Relaxed);
    let (mut latencies, failed) = watching.await.unwrap();
    let p99 = p99(&mut latencies);
    println!(
        "  {name}: victim p99 {:.1} ms over {} reads, {failed} not 200; {report}",
        p99.as_secs_f64() * 1000.0,
        latencies.len()
    );
    assert_eq!(failed, 0, "{name}: the victim was refused");
    p99
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "half a minute of attacks; run by scripts/checks/fault-campaign"]
async fn attacks_leave_a_victim_served() {
    let root = std::env::temp_dir().join(format!("statki-attacks-{}", std::process::id()));
    let cluster = EmbeddedPostgres::start(&root.join("data")).await.unwrap();
    let url = cluster.database_url();
    let port = common::free_port();
    let mut replica = start_default_replica(port, &url, &root.join("replica.log")).await;
    let base = format!("http://127.0.0.1:{port}");
    let victim_http = client_from("127.0.0.2");
    let (_, victim_token) = register_from(&victim_http, &base, "victim").await;
    let created: Value = victim_http
        .post(format!("{base}/v1/matches"))
        .bearer_auth(&victim_token)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let victim_url = format!("{base}/v1/matches/{}", created["id"].as_str().unwrap());
    let attacker = client_from("127.0.0.3");
    let (_, attacker_token) = register_from(&attacker, &base, "attacker").await;
    println!("attacks on one replica with default settings, 4 s each:");
    let mut worst = Duration::ZERO;

    // 1. The password-change flood: one token on 24 connections, guessing.
    worst = worst.max(
        during("password flood", &victim_http, &victim_url, &victim_token, |stop| {
            let (attacker, base, token) = (attacker.clone(), base.clone(), attacker_token.clone());
            async move {
                let counts = Arc::new(std::sync::Mutex::new(HashMap::<u16, u64>::new()));
                let tasks: Vec<_> = (0..24)
                    .map(|i| {
                        let (http, base, token, stop, counts) = (
                            attacker.clone(),
                            base.clone(),
                            token.clone(),
                            stop.clone(),
                            counts.clone(),
                        );
                        tokio::spawn(async move {
                            let mut n = 0;
                            while !stop.load(Ordering::Relaxed) {
                                n += 1;
                                let status = http
                                    .put(format!("{base}/v1/me/password"))
                                    .bearer_auth(&token)
                                    .json(&json!({ "current_password": format!("guess {i} {n}"), "password": "a new password!" }))
                                    .send()
                                    .await
                                    .map_or(0, |a| a.status().as_u16());
                                *counts.lock().unwrap().entry(status).or_default() += 1;
                            }
                        })
                    })
                    .collect();
                tokio::time::sleep(Duration::from_secs(4)).await;
                stop.store(true, Ordering::Relaxed);
                for task in tasks {
                    task.await.unwrap();
                }
                let counts = counts.lock().unwrap().clone();
                let mut counts: Vec<_> = counts.into_iter().collect();
                counts.sort();
                format!("attacker's answers {counts:?} (403 = a guess checked)")
            }
        })
        .await,
    );

    // 2. Concurrent challenges to one player, from 12 accounts on their own addresses.
    worst = worst.max(
        during(
            "12 concurrent challenges",
            &victim_http,
            &victim_url,
            &victim_token,
            |_stop| {
                let base = base.clone();
                async move {
                    let target = register_from(&client_from("127.0.0.4"), &base, "target")
                        .await
                        .0;
                    let mut challengers = Vec::new();
                    for i in 0..12 {
                        let http = client_from(&format!("127.0.1.{}", i + 1));
                        let token = register_from(&http, &base, &format!("challenger{i}"))
                            .await
                            .1;
                        challengers.push((http, token));
                    }
                    let answers =
                        futures::future::join_all(challengers.iter().map(|(http, token)| {
                            http.post(format!("{base}/v1/matches"))
                                .bearer_auth(token)
                                .json(&json!({ "opponent": target }))
                                .send()
                        }))
                        .await;
                    let errors = answers
                        .iter()
                        .filter(|a| a.as_ref().map_or(true, |a| a.status().is_server_error()))
                        .count();
                    assert_eq!(errors, 0, "concurrent challenges answered 5xx");
                    format!("{errors} answers 5xx of 12")
                }
            },
        )
        .await,
    );

    // 3. Guessing one account's password from 20 addresses.
    worst = worst.max(
        during("log-in guesses from 20 addresses", &victim_http, &victim_url, &victim_token, |stop| {
            let base = base.clone();
            async move {
                let checked = Arc::new(AtomicU64::new(0));
                let tasks: Vec<_> = (0..20)
                    .map(|i| {
                        let (base, stop, checked) = (base.clone(), stop.clone(), checked.clone());
                        let http = client_from(&format!("127.0.2.{}", i + 1));
                        tokio::spawn(async move {
                            let mut n = 0;
                            while !stop.load(Ordering::Relaxed) {
                                n += 1;
                                let answer = http
                                    .post(format!("{base}/v1/sessions"))
                                    .json(&json!({ "name": "attacker", "password": format!("guess {i} {n}") }))
                                    .send()
                                    .await;
                                if answer.is_ok_and(|a| a.status() == StatusCode::UNAUTHORIZED) {
                                    checked.fetch_add(1, Ordering::Relaxed);
                                }
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        })
                    })
                    .collect();
                tokio::time::sleep(Duration::from_secs(4)).await;
                stop.store(true, Ordering::Relaxed);
                for task in tasks {
                    task.await.unwrap();
                }
                let checked = checked.load(Ordering::Relaxed);
                assert!(checked <= 6, "{checked} guesses checked in 4 s");
                format!("{checked} guesses checked against the account")
            }
        })
        .await,
    );

    // 4. Hoarding connections from one address: 400 idle, then 400 with one probe each.
    worst = worst.max(
        during(
            "connection hoarding",
            &victim_http,
            &victim_url,
            &victim_token,
            |_stop| {
                let address = format!("127.0.0.1:{port}");
                async move {
                    let mut idle = Vec::new();
                    for _ in 0..400 {
                        if let Ok(stream) = tokio::net::TcpStream::connect(&address).await {
                            idle.push(stream);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let mut open = 0;
                    for stream in &idle {
                        let mut byte = [0u8; 1];
                        match stream.try_read(&mut byte) {
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => open += 1,
                            _ => {}
                        }
                    }
                    drop(idle);
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    assert!(open <= 256, "{open} connections held by one address");
                    format!("one address holds {open} of 400 connections")
                }
            },
        )
        .await,
    );

    // 5. /metrics and /readyz floods.
    worst = worst.max(
        during(
            "/metrics and /readyz flood",
            &victim_http,
            &victim_url,
            &victim_token,
            |stop| {
                let (attacker, base) = (attacker.clone(), base.clone());
                async move {
                    let statuses =
                        Arc::new(std::sync::Mutex::new(HashMap::<(&str, u16), u64>::new()));
                    let tasks: Vec<_> = (0..8)
                        .map(|i| {
                            let (http, base, stop, statuses) = (
                                attacker.clone(),
                                base.clone(),
                                stop.clone(),
                                statuses.clone(),
                            );
                            tokio::spawn(async move {
                                let path = if i % 2 == 0 { "/metrics" } else { "/readyz" };
                                while !stop.load(Ordering::Relaxed) {
                                    let status = http
                                        .get(format!("{base}{path}"))
                                        .send()
                                        .await
                                        .map_or(0, |a| a.status().as_u16());
                                    *statuses.lock().unwrap().entry((path, status)).or_default() +=
                                        1;
                                }
                            })
                        })
                        .collect();
                    tokio::time::sleep(Duration::from_secs(4)).await;
                    stop.store(true, Ordering::Relaxed);
                    for task in tasks {
                        task.await.unwrap();
                    }
                    let statuses = statuses.lock().unwrap().clone();
                    assert!(
                        !statuses.contains_key(&("/metrics", 200)),
                        "/metrics is public"
                    );
                    let mut statuses: Vec<_> = statuses.into_iter().collect();
                    statuses.sort();
                    format!("answers {statuses:?} (/readyz from a cached probe)")
                }
            },
        )
        .await,
    );

    // 6. A forged revocation of every player, as any role that can connect.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    sqlx::query("SELECT pg_notify('statki_tokens', id || ':9007199254740991000') FROM players")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    worst = worst.max(
        during(
            "forged revocation notices",
            &victim_http,
            &victim_url,
            &victim_token,
            |_stop| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "the victim's token still accepted".to_owned()
            },
        )
        .await,
    );
    println!("  worst victim p99: {:.1} ms", worst.as_secs_f64() * 1000.0);
    replica.kill().await.unwrap();
    cluster.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&root);
    assert!(worst < Duration::from_secs(2), "victim p99 {worst:?}");
}
