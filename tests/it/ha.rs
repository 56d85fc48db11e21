//! The database host dies and nothing is lost: `scripts/cluster up --ha` starts etcd, two
//! PostgreSQL nodes under Patroni (synchronous replication) and HAProxy fronts, with two
//! replicas of the real binary behind the HTTP balancer. 40 matches fire every shot with
//! an `Idempotency-Key` while the leading database node is SIGKILLed; the old leader then
//! rejoins as a standby and the new leader is killed in turn (failover back). Every
//! acknowledged shot is stored exactly once, every match ends with one result by sinking
//! (nobody loses on time), streams followed through the balancer (held through a failover,
//! or resumed) miss no event, and `statki verify` passes. Then the standby is killed:
//! writes go on (asynchronously) and reads through the standby front fall back to the
//! leader. The figures (kill to first
//! acknowledged write, 503s answered, retries) are printed for docs/operations.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common;

const MATCHES: usize = 40;
/// Matches followed over event streams through the balancer (both seats).
const STREAMED: usize = 4;
/// Both fleets lie in rows 6–10 and each player scans rows 6–10, so a match lasts at most
/// 100 shots.
const FIRST_ROW: u32 = 6;
/// Pause between one match's shots, so both failovers land while every match is played.
const SHOT_PAUSE: Duration = Duration::from_millis(250);
/// The pause while the old leader rejoins (which takes longer on a loaded machine), so the
/// matches are still being played when the second failover comes.
const SLOW_SHOT_PAUSE: Duration = Duration::from_millis(1000);
/// The whole rehearsal, set-up and clean-up aside.
const BUDGET: Duration = Duration::from_secs(240);

/// `scripts/cluster` with this test's state dir; `down` on drop.
struct Cluster {
    state: PathBuf,
}

impl Cluster {
    fn script(state: &Path) -> Command {
        let mut command = common::script("cluster");
        command.env("STATKI_CLUSTER_DIR", state);
        command
    }

    fn run(state: &Path, args: &[&str]) -> String {
        common::run_ok(
            Self::script(state).args(args),
            &format!("scripts/cluster {args:?}"),
        )
    }

    /// The database node that leads now, from `scripts/cluster status`.
    fn roles(state: &Path) -> BTreeMap<String, String> {
        Self::run(state, &["status"])
            .lines()
            .filter_map(|line| line.strip_prefix("db node "))
            .filter_map(|rest| {
                let (node, rest) = rest.split_once(' ')?;
                let role = rest.split("  ").last()?.trim().to_owned();
                Some((node.to_owned(), role))
            })
            .collect()
    }

    /// Waits until node `node` has `role` (e.g. "synchronous standby").
    fn wait_role(state: &Path, node: &str, role: &str, within: Duration) {
        let start = Instant::now();
        while start.elapsed() < within {
            if Self::roles(state).get(node).map(String::as_str) == Some(role) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "database node {node} is not `{role}` after {within:?}: {:?}",
            Self::roles(state)
        );
    }

    /// The URL of the synchronous standby's PostgreSQL itself (port P+60+J), not the front.
    fn standby_url(state: &Path, port: u16) -> String {
        let start = Instant::now();
        loop {
            let standby = Self::roles(state)
                .into_iter()
                .find(|(_, role)| role == "synchronous standby");
            if let Some((node, _)) = standby {
                let node: u16 = node.parse().expect("a node number");
                let password = std::fs::read_to_string(state.join("ha/postgres.password"))
                    .expect("the superuser's password");
                return format!(
                    "postgres://postgres:{}@127.0.0.1:{}/statki",
                    password.trim(),
                    port + 60 + node
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no synchronous standby"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The last lines of every log the cluster keeps (replicas, the database front, the
    /// Patroni nodes), for a failure message that says why.
    fn log_tails(state: &Path) -> String {
        let mut logs: Vec<PathBuf> = [state.to_path_buf(), state.join("ha")]
            .iter()
            .filter_map(|dir| std::fs::read_dir(dir).ok())
            .flatten()
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
            .collect();
        logs.sort();
        logs.iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(30)..].join("\n");
                format!("--- {} (last 30 lines)\n{tail}\n", path.display())
            })
            .collect()
    }

    fn leader(state: &Path) -> String {
        Self::roles(state)
            .into_iter()
            .find(|(_, role)| role == "leader")
            .map(|(node, _)| node)
            .expect("a leading node")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Self::script(&self.state).arg("down").status();
    }
}

/// A base port P in this suite's range with P, P+1, P+2 (balancer, replicas) and the
/// database's ports P+50…P+81 free.
fn free_ports() -> u16 {
    let offsets = [0u16, 1, 2, 50, 51, 61, 62, 71, 72, 80, 81];
    let start = (std::process::id() % 8) as u16;
    (0..8)
        .map(|step| 20_100 + ((start + step) % 8) * 100)
        .find(|base| {
            offsets
                .iter()
                .all(|offset| std::net::TcpListener::bind(("127.0.0.1", base + offset)).is_ok())
        })
        .expect("free ports in 20100-20981")
}

/// What the clients saw, over all requests.
#[derive(Default)]
struct Tally {
    /// Attempts answered `503 unavailable` (by a replica or by the balancer).
    unavailable: AtomicUsize,
    /// Attempts answered 502/504 by the balancer, or cut before any answer.
    transport: AtomicUsize,
    /// Attempts retried (any of the above, 429 or a key still in progress).
    retries: AtomicUsize,
    /// Acknowledged writes: (attempt sent, answer received).
    acks: Mutex<Vec<(Instant, Instant)>>,
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
    tally: Arc<Tally>,
}

impl Client {
    /// Sends a request until it is answered: a transport error, 502/503/504, 429 or a key
    /// still in progress is retried with the same `Idempotency-Key`, so a command runs at
    /// most once. A 503 must be the service's `unavailable` with `Retry-After`.
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Value {
        let key = uuid::Uuid::new_v4().to_string();
        for _ in 0..600 {
            let mut request = self
                .http
                .request(method.clone(), format!("{}{path}", self.base))
                .timeout(Duration::from_secs(20));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            if let Some(body) = &body {
                request = request.json(body).header("Idempotency-Key", &key);
            }
            let sent = Instant::now();
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    let answer = response.json().await.expect("JSON answer");
                    if body.is_some() {
                        self.tally.acks.lock().unwrap().push((sent, Instant::now()));
                    }
                    return answer;
                }
                Ok(response) => {
                    let status = response.status();
                    let retry_after = response.headers().get("retry-after").cloned();
                    let problem: Value = response.json().await.unwrap_or(Value::Null);
                    if status == StatusCode::SERVICE_UNAVAILABLE {
                        assert_eq!(problem["code"], "unavailable", "{method} {path}: {problem}");
                        assert!(
                            retry_after.is_some(),
                            "{method} {path}: 503 without Retry-After"
                        );
                        self.tally.unavailable.fetch_add(1, Ordering::Relaxed);
                    } else if matches!(
                        status,
                        StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT
                    ) {
                        self.tally.transport.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let retry = status == StatusCode::TOO_MANY_REQUESTS
                            || problem["code"] == "idempotency_key_in_progress";
                        assert!(retry, "{method} {path}: {status} {problem}");
                    }
                }
                Err(err) => {
                    assert!(!err.is_decode(), "{method} {path}: {err}");
                    self.tally.transport.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.tally.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{method} {path}: no answer after 600 tries");
    }
}

/// Follows one match stream to its end, resuming with `Last-Event-ID` whenever the
/// connection breaks; returns every event's data in order and the number of reconnects.
async fn follow(client: Client, match_id: String, token: String) -> (Vec<Value>, usize) {
    let mut events: Vec<Value> = Vec::new();
    let mut reconnects = 0;
    loop {
        let mut request = client
            .http
            .get(format!(
                "{}/v1/matches/{match_id}/stream?after=0",
                client.base
            ))
            .bearer_auth(&token);
        if let Some(last) = events.last() {
            request = request.header("Last-Event-ID", last["seq"].to_string());
        }
        let ended = match request.send().await {
            Ok(response) if response.status() == StatusCode::OK => {
                let mut body = response.bytes_stream();
                let mut buffer = String::new();
                loop {
                    match body.next().await {
                        Some(Ok(chunk)) => {
                            buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
                            events.extend(common::take_logged_events(&mut buffer));
                        }
                        Some(Err(_)) => break false,
                        None => break true,
                    }
                }
            }
            Ok(response) => {
                let status = response.status();
                assert!(status.is_server_error(), "stream answered {status}");
                false
            }
            Err(_) => false,
        };
        let finished = events.iter().any(|event| event["kind"] == "match_finished");
        if ended && finished {
            return (events, reconnects);
        }
        reconnects += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Seat {
    id: String,
    token: String,
    next: u32,
}

/// The shooter's `n`-th cell: rows 6–10 left to right, top to bottom.
fn cell(n: u32) -> String {
    let column = char::from(b'A' + (n % 10) as u8);
    format!("{column}{}", FIRST_ROW + n / 10)
}

/// Plays one match to its end; returns every acknowledged shot as (shooter, cell).
async fn play(
    client: Client,
    match_id: String,
    mut seats: [Seat; 2],
    acked: Arc<AtomicUsize>,
    slow: Arc<AtomicBool>,
) -> BTreeSet<(String, String)> {
    let view = client
        .call(
            Method::GET,
            &format!("/v1/matches/{match_id}"),
            Some(&seats[0].token),
            None,
        )
        .await;
    let mut turn = view["turn"].as_str().expect("a turn in battle").to_owned();
    let mut shots = BTreeSet::new();
    loop {
        let seat = seats
            .iter_mut()
            .find(|seat| seat.id == turn)
            .expect("the seat on turn");
        let target = cell(seat.next);
        seat.next += 1;
        let answer = client
            .call(
                Method::POST,
                &format!("/v1/matches/{match_id}/shots"),
                Some(&seat.token),
                Some(json!({ "cell": target })),
            )
            .await;
        assert!(shots.insert((seat.id.clone(), target)), "a cell shot twice");
        acked.fetch_add(1, Ordering::Relaxed);
        if answer["phase"] == "finished" {
            return shots;
        }
        turn = answer["next_turn"].as_str().expect("next_turn").to_owned();
        let pause = if slow.load(Ordering::Relaxed) {
            SLOW_SHOT_PAUSE
        } else {
            SHOT_PAUSE
        };
        tokio::time::sleep(pause).await;
    }
}

/// Two players, a match between them with both fleets in rows 6–10, in battle.
async fn set_up_match(client: &Client, round: usize) -> (String, [Seat; 2]) {
    let ships: Vec<Value> = ["A6", "A7", "A8", "A9", "A10"]
        .iter()
        .map(|bow| json!({ "cell": bow, "orientation": "horizontal" }))
        .collect();
    let fleet = json!({ "ships": ships });
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let mut seats = Vec::new();
    for side in ["a", "b"] {
        let player = client
            .call(
                Method::POST,
                "/v1/players",
                None,
                Some(json!({ "name": format!("h{side}{round}{suffix}") })),
            )
            .await;
        seats.push(Seat {
            id: player["id"].as_str().unwrap().to_owned(),
            token: player["token"].as_str().unwrap().to_owned(),
            next: 0,
        });
    }
    let created = client
        .call(
            Method::POST,
            "/v1/matches",
            Some(&seats[0].token),
            Some(json!({ "ruleset": "statki", "ranked": false })),
        )
        .await;
    let match_id = created["id"].as_str().unwrap().to_owned();
    client
        .call(
            Method::POST,
            &format!("/v1/matches/{match_id}/join"),
            Some(&seats[1].token),
            Some(json!({})),
        )
        .await;
    for seat in &seats {
        client
            .call(
                Method::PUT,
                &format!("/v1/matches/{match_id}/fleet"),
                Some(&seat.token),
                Some(fleet.clone()),
            )
            .await;
    }
    let [first, second] = <[Seat; 2]>::try_from(seats).ok().unwrap();
    (match_id, [first, second])
}

/// Every event of a match as `token` may see it, from the paged `/events` endpoint.
async fn event_log(client: &Client, match_id: &str, token: &str) -> Vec<Value> {
    let mut events: Vec<Value> = Vec::new();
    loop {
        let after = events
            .last()
            .map_or(0, |event| event["seq"].as_i64().unwrap());
        let page = client
            .call(
                Method::GET,
                &format!("/v1/matches/{match_id}/events?after={after}"),
                Some(token),
                None,
            )
            .await;
        let page = page.as_array().expect("a page of events").clone();
        if page.is_empty() {
            return events;
        }
        events.extend(page);
    }
}

/// Kills the leading database node; returns the node killed and the instant the kill was
/// done (`scripts/cluster` returns right after sending SIGKILL).
async fn kill_leader(state: &Path) -> (Instant, String) {
    let state = state.to_owned();
    tokio::task::spawn_blocking(move || {
        let leader = Cluster::leader(&state);
        Cluster::run(&state, &["kill-db", &leader]);
        (Instant::now(), leader)
    })
    .await
    .unwrap()
}

/// From `kill` to the first acknowledged write whose attempt was sent after it (an attempt
/// sent after the kill can only have been served by the new leader).
fn kill_to_first_ack(tally: &Tally, kill: Instant) -> Duration {
    tally
        .acks
        .lock()
        .unwrap()
        .iter()
        .filter(|(sent, _)| *sent >= kill)
        .map(|(_, answered)| *answered - kill)
        .min()
        .expect("a write acknowledged after the kill")
}

/// The replicas' sessions (through the leader's front) are `statki_owner`, no superuser,
/// which cannot become one (before, they were Patroni's `postgres`).
async fn replicas_connect_as_the_owner(database_url: &str) {
    use sqlx::Connection as _;
    let mut admin = sqlx::PgConnection::connect(database_url)
        .await
        .expect("the superuser's URL `up` printed");
    let users: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT usename::text FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND backend_type = 'client backend'",
    )
    .fetch_all(&mut admin)
    .await
    .expect("sessions");
    assert_eq!(users, ["statki_owner"], "the replicas' sessions");
    let superuser: bool =
        sqlx::query_scalar("SELECT rolsuper FROM pg_roles WHERE rolname = 'statki_owner'")
            .fetch_one(&mut admin)
            .await
            .expect("the owner role");
    assert!(!superuser);
}

/// Patroni's unsafe endpoints, etcd and every database role answer only with the
/// credentials `up` generated: before, `PATCH /config {"synchronous_mode": false}`
/// silently turned synchronous replication off, `POST /switchover` worked, etcd keys were
/// writable by anyone on the machine, and `postgres` and `replicator` logged in without a
/// password.
async fn control_plane_refuses_strangers(port: u16) {
    let http = reqwest::Client::new();
    for node in [1, 2] {
        let rest = format!("http://127.0.0.1:{}", port + 70 + node);
        let patch = http
            .patch(format!("{rest}/config"))
            .json(&json!({ "synchronous_mode": false }))
            .send()
            .await
            .expect("Patroni answers");
        assert_eq!(
            patch.status(),
            StatusCode::UNAUTHORIZED,
            "PATCH /config on node {node}"
        );
        let switchover = http
            .post(format!("{rest}/switchover"))
            .json(&json!({ "leader": "pg1" }))
            .send()
            .await
            .expect("Patroni answers");
        assert_eq!(
            switchover.status(),
            StatusCode::UNAUTHORIZED,
            "POST /switchover on node {node}"
        );
    }
    let config: Value = http
        .get(format!("http://127.0.0.1:{}/config", port + 71))
        .send()
        .await
        .expect("Patroni answers")
        .json()
        .await
        .expect("its configuration");
    assert_eq!(config["synchronous_mode"], true, "{config}");
    // Every database role gives its password, on every node and through both fronts
    // (before, `postgres` and `replicator` were trusted on loopback).
    for database_port in [port + 61, port + 62, port + 80, port + 81] {
        for role in ["postgres", "replicator", "statki_owner", "statki_app"] {
            let options = sqlx::postgres::PgConnectOptions::new_without_pgpass()
                .host("127.0.0.1")
                .port(database_port)
                .username(role)
                .database("postgres");
            let login = {
                use sqlx::Connection as _;
                sqlx::PgConnection::connect_with(&options).await
            };
            assert!(
                login.is_err(),
                "{role} logged in on port {database_port} without a password"
            );
        }
    }
    let etcd = format!("http://127.0.0.1:{}", port + 50);
    for args in [
        &["get", "--prefix", "/"][..],
        &["put", "/statki/stranger", "was here"],
        &["del", "--prefix", "/"],
    ] {
        let output = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &etcd])
            .args(args)
            .output()
            .expect("run etcdctl");
        assert!(
            !output.status.success(),
            "etcdctl {args:?} without credentials: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_database_fails_over_twice_and_no_acknowledged_move_is_lost() {
    let started = Instant::now();
    let state =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("ha-{}", std::process::id()));
    let port = free_ports();
    let output = Cluster::script(&state)
        .args(["up", "--replicas", "2", "--port", &port.to_string(), "--ha"])
        .env("STATKI_BIN", env!("CARGO_BIN_EXE_statki"))
        .env("STATKI_DB_POOL", "8")
        // 80 players register from one address.
        .env("STATKI_RATE_LIMITS", "false")
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("STATKI_READ_DATABASE_URL")
        .output()
        .expect("run scripts/cluster up --ha");
    let cluster = Cluster {
        state: state.clone(),
    };
    assert!(
        output.status.success(),
        "scripts/cluster up --ha failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        Cluster::log_tails(&state)
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    let balancer = lines.last().expect("the balancer's URL").trim().to_owned();
    let base = balancer.clone();
    assert_eq!(balancer, format!("http://127.0.0.1:{port}"));
    let database_url = lines
        .iter()
        .find_map(|line| line.strip_prefix("DATABASE_URL="))
        .expect("a DATABASE_URL= line")
        .to_owned();
    let read_url = lines
        .iter()
        .find_map(|line| line.strip_prefix("STATKI_READ_DATABASE_URL="))
        .expect("a STATKI_READ_DATABASE_URL= line")
        .to_owned();
    let up_took = started.elapsed();
    control_plane_refuses_strangers(port).await;
    replicas_connect_as_the_owner(&database_url).await;

    let tally = Arc::new(Tally::default());
    let client = Client {
        http: reqwest::Client::new(),
        base,
        tally: tally.clone(),
    };
    let state_for_play = state.clone();
    let outcome = tokio::spawn(tokio::time::timeout(BUDGET, async move {
        let state = state_for_play;
        let mut matches = Vec::new();
        for round in 0..MATCHES {
            matches.push(set_up_match(&client, round).await);
        }
        let acked = Arc::new(AtomicUsize::new(0));
        let slow = Arc::new(AtomicBool::new(false));
        let mut streams = Vec::new();
        let mut games = Vec::new();
        for (index, (match_id, seats)) in matches.into_iter().enumerate() {
            if index < STREAMED {
                for seat in &seats {
                    streams.push((
                        match_id.clone(),
                        seat.token.clone(),
                        tokio::spawn(follow(client.clone(), match_id.clone(), seat.token.clone())),
                    ));
                }
            }
            let token = seats[0].token.clone();
            games.push((
                match_id.clone(),
                token,
                tokio::spawn(play(
                    client.clone(),
                    match_id,
                    seats,
                    acked.clone(),
                    slow.clone(),
                )),
            ));
        }

        // First failover: the leader dies mid-play.
        while acked.load(Ordering::Relaxed) < 400 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first_at = acked.load(Ordering::Relaxed);
        let (first_kill, first_leader) = kill_leader(&state).await;
        slow.store(true, Ordering::Relaxed);
        // The old leader comes back as a standby, catches up and becomes synchronous again.
        {
            let state = state.clone();
            let node = first_leader.clone();
            tokio::task::spawn_blocking(move || {
                let other = if node == "1" { "2" } else { "1" };
                Cluster::wait_role(&state, other, "leader", Duration::from_secs(60));
                Cluster::run(&state, &["start-db", &node]);
                Cluster::wait_role(&state, &node, "synchronous standby", Duration::from_secs(60));
            })
            .await
            .unwrap();
        }
        let first_failover = kill_to_first_ack(&tally, first_kill);
        // Second failover: back to the first node.
        let second_at = acked.load(Ordering::Relaxed);
        let (second_kill, second_leader) = kill_leader(&state).await;
        slow.store(false, Ordering::Relaxed);
        assert_ne!(first_leader, second_leader, "the second failover kills the new leader");
        {
            let state = state.clone();
            tokio::task::spawn_blocking(move || {
                Cluster::wait_role(&state, &first_leader, "leader", Duration::from_secs(60));
                // Both nodes again, for what follows.
                Cluster::run(&state, &["start-db", &second_leader]);
                Cluster::wait_role(
                    &state,
                    &second_leader,
                    "synchronous standby",
                    Duration::from_secs(60),
                );
            })
            .await
            .unwrap();
        }

        let mut played = Vec::new();
        for (match_id, token, game) in games {
            played.push((match_id, token, game.await.expect("a match played to its end")));
        }
        let second_failover = kill_to_first_ack(&tally, second_kill);
        let total: usize = played.iter().map(|(_, _, shots)| shots.len()).sum();
        assert!(
            second_at < total,
            "both kills happened while matches were played ({first_at}, {second_at} of {total} shots)"
        );

        let (mut reconnects, mut spanned) = (0, 0);
        for (match_id, token, stream) in streams {
            let (seen, again) = stream.await.expect("a stream followed to its end");
            reconnects += again;
            // Clock extensions are written after a failover: a stream that carried both
            // was open (held, or resumed) across both.
            let extensions = seen
                .iter()
                .filter(|event| event["kind"] == "clock_extended")
                .count();
            spanned += usize::from(extensions >= 2);
            let log = event_log(&client, &match_id, &token).await;
            let fixed = |events: &[Value]| -> Vec<Value> {
                events
                    .iter()
                    .map(|event| {
                        json!([event["seq"], event["kind"], event["at"], event["player"], event["cell"], event["outcome"]])
                    })
                    .collect()
            };
            assert_eq!(
                fixed(&seen),
                fixed(&log),
                "match {match_id}: the stream missed, repeated or reordered events"
            );
        }
        let mut logged_total = 0;
        for (match_id, token, shots) in &played {
            let log = event_log(&client, match_id, token).await;
            let fired: Vec<(String, String)> = log
                .iter()
                .filter(|event| event["kind"] == "shot_fired")
                .map(|event| {
                    (
                        event["player"].as_str().expect("shooter").to_owned(),
                        event["cell"].as_str().expect("cell").to_owned(),
                    )
                })
                .collect();
            logged_total += fired.len();
            let logged: BTreeSet<(String, String)> = fired.iter().cloned().collect();
            assert_eq!(logged.len(), fired.len(), "match {match_id}: a shot stored twice");
            assert_eq!(&logged, shots, "match {match_id}: acknowledged shots and the log differ");
            let results: Vec<&Value> = log
                .iter()
                .filter(|event| event["kind"] == "match_finished")
                .collect();
            assert_eq!(results.len(), 1, "match {match_id}: one result");
            // Each failover was an outage of the whole service: the running clock was given
            // its time back (docs/clocks.md), once per failover.
            let extended = log
                .iter()
                .filter(|event| event["kind"] == "clock_extended")
                .count();
            assert!(extended >= 2, "match {match_id}: {extended} clock extensions for two failovers");
            assert_eq!(results[0]["reason"], "all_sunk", "match {match_id}: nobody lost on time");
        }
        let unavailable = tally.unavailable.load(Ordering::Relaxed);
        eprintln!(
            "ha: {total} shots acknowledged in {MATCHES} matches, {logged_total} stored (lost {}, duplicated {}); \
             kills after {first_at} and {second_at} shots; kill to first acknowledged write {:.2} s and {:.2} s; \
             {unavailable} answers 503 unavailable, {} 502/504 or cut, \
             {} retries; {reconnects} stream reconnects",
            total - logged_total.min(total),
            logged_total.saturating_sub(total),
            first_failover.as_secs_f64(),
            second_failover.as_secs_f64(),
            tally.transport.load(Ordering::Relaxed),
            tally.retries.load(Ordering::Relaxed),
        );
        assert!(unavailable > 0, "no request met the failover, so nothing was tested");
        // The balancer keeps a replica's streams when it takes the replica out of rotation
        // (deploy/haproxy.cfg), so a stream may live through a failover without reconnecting.
        assert!(spanned > 0, "no stream was followed across both failovers, so nothing was tested");
    }))
    .await;
    let outcome = match outcome {
        Ok(finished) => finished,
        Err(failed) => std::panic::resume_unwind(failed.into_panic()),
    };
    outcome.expect("the failover rehearsal finished within its budget");

    // The record of play verifies on the new leader.
    common::verify(&database_url, "the new leader");

    // The standby serves audits: `statki verify` and the auditor role run there as they are,
    // and the replicas' read pools have been reading from it. Addressed directly: under a
    // loaded machine a slow Patroni check can make the read front fall back to the leader
    // for a moment, which is its job but not what is tested here.
    let standby_url = {
        let state = state.clone();
        tokio::task::spawn_blocking(move || Cluster::standby_url(&state, port))
            .await
            .unwrap()
    };
    common::verify(&standby_url, "the standby");
    let standby = sqlx::PgPool::connect(&standby_url)
        .await
        .expect("the standby");
    let mut audit = standby.acquire().await.unwrap();
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut *audit)
        .await
        .unwrap();
    assert!(in_recovery, "the standby is in recovery");
    sqlx::query("SET ROLE statki_auditor")
        .execute(&mut *audit)
        .await
        .unwrap();
    let fired: i64 = sqlx::query_scalar("SELECT count(*) FROM shot_log")
        .fetch_one(&mut *audit)
        .await
        .unwrap();
    assert!(
        fired > 0,
        "the auditor reads the record of play on the standby"
    );
    drop(audit);
    // A read pool holds connections only while it is used (idle ones close, and a failover
    // drops them), so drive reads that may lag through the balancer while looking.
    // After the standby's own kill and restart, its front may still send reads to the
    // leader until its health checks pass again (slow on a loaded machine), and a 429 or a
    // cut connection reads nothing: look for up to a minute, counting the answers.
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answers = std::collections::BTreeMap::new();
    loop {
        let status = http
            .get(format!("{balancer}/v1/ladder/statki"))
            .send()
            .await
            .map_or(0, |response| response.status().as_u16());
        *answers.entry(status).or_insert(0) += 1;
        let readers: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = 'statki' AND pid <> pg_backend_pid()",
        )
        .fetch_one(&standby)
        .await
        .unwrap();
        if readers > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replicas' read pools connect to the standby (ladder reads answered, by status: {answers:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    standby.close().await;

    let client = Client {
        http: reqwest::Client::new(),
        base: balancer.clone(),
        tally: Arc::new(Tally::default()),
    };
    standby_lagging(&state, &client, &database_url, &standby_url).await;
    standby_gone(&state, &database_url, &read_url, &balancer).await;
    drop(cluster);
    // Kept when the test fails, for its logs.
    let _ = std::fs::remove_dir_all(&state);
    eprintln!(
        "ha: cluster up in {:.1} s; whole test {:.1} s",
        up_took.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// The standby dies: commits wait for it only until Patroni drops it from
/// synchronous_standby_names, then go on asynchronously; reads through the standby front
/// fall back to the leader, and so do the service's reads that may lag.
async fn standby_gone(state: &Path, database_url: &str, read_url: &str, balancer: &str) {
    let leader = Cluster::leader(state);
    let standby = if leader == "1" { "2" } else { "1" };
    let primary = sqlx::PgPool::connect(database_url)
        .await
        .expect("the leader");
    sqlx::query("CREATE TABLE IF NOT EXISTS ha_probe (n int)")
        .execute(&primary)
        .await
        .unwrap();
    Cluster::run(state, &["kill-db", standby]);
    let killed = Instant::now();
    let mut longest = Duration::ZERO;
    for n in 0..20 {
        let start = Instant::now();
        tokio::time::timeout(
            Duration::from_secs(30),
            sqlx::query("INSERT INTO ha_probe VALUES ($1)")
                .bind(n)
                .execute(&primary),
        )
        .await
        .expect("a commit with the standby gone finishes")
        .expect("a commit with the standby gone succeeds");
        longest = longest.max(start.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sync_names: String = sqlx::query_scalar("SHOW synchronous_standby_names")
        .fetch_one(&primary)
        .await
        .unwrap();
    assert_eq!(sync_names, "", "Patroni released the synchronous standby");
    // Reads through the standby front reach the leader now.
    let reader = sqlx::PgPool::connect(read_url)
        .await
        .expect("the read front answers");
    let (in_recovery, rows): (bool, i64) =
        sqlx::query_as("SELECT pg_is_in_recovery(), (SELECT count(*) FROM ha_probe)")
            .fetch_one(&reader)
            .await
            .unwrap();
    assert!(
        !in_recovery,
        "with no standby, the read front serves the leader"
    );
    assert_eq!(rows, 20);
    // The service: a player registered now is in its profile and the ladder answers, read
    // through the standby front (now the leader) or, on a connection the dead standby
    // held, from the primary.
    let client = Client {
        http: reqwest::Client::new(),
        base: balancer.to_owned(),
        tally: Arc::new(Tally::default()),
    };
    let player = client
        .call(
            Method::POST,
            "/v1/players",
            None,
            Some(json!({ "name": "after-standby" })),
        )
        .await;
    let id = player["id"].as_str().expect("an id");
    for _ in 0..3 {
        let profile = client
            .call(Method::GET, &format!("/v1/players/{id}"), None, None)
            .await;
        assert_eq!(profile["id"], id);
        client
            .call(Method::GET, "/v1/ladder/statki", None, None)
            .await;
    }
    assert_eq!(
        client.tally.unavailable.load(Ordering::Relaxed),
        0,
        "reads fell back without a 503"
    );
    eprintln!(
        "ha: standby killed; the longest commit after it took {:.2} s; writes went on asynchronously ({:.1} s for 20)",
        longest.as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
}

/// The standby lags (its replay paused): commits go on (synchronous replication waits for
/// the standby's flush, not its replay), and a stream opened from the beginning still gets
/// every event, its catch-up falling back to the primary for what the standby lacks.
async fn standby_lagging(state: &Path, client: &Client, database_url: &str, standby_url: &str) {
    // Patroni resumes a paused replay at its next loop unless its management is paused.
    Cluster::run(state, &["patronictl", "pause", "--wait"]);
    let standby = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(standby_url)
        .await
        .expect("the standby");
    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&standby)
        .await
        .unwrap();
    let (match_id, mut seats) = set_up_match(client, MATCHES).await;
    let view = client
        .call(
            Method::GET,
            &format!("/v1/matches/{match_id}"),
            Some(&seats[0].token),
            None,
        )
        .await;
    let mut turn = view["turn"].as_str().expect("a turn").to_owned();
    let started = Instant::now();
    for _ in 0..10 {
        let seat = seats.iter_mut().find(|seat| seat.id == turn).unwrap();
        let target = cell(seat.next);
        seat.next += 1;
        let answer = client
            .call(
                Method::POST,
                &format!("/v1/matches/{match_id}/shots"),
                Some(&seat.token),
                Some(json!({ "cell": target })),
            )
            .await;
        turn = answer["next_turn"].as_str().expect("next_turn").to_owned();
    }
    let shots_took = started.elapsed();
    let primary = sqlx::PgPool::connect(database_url)
        .await
        .expect("the leader");
    let count = "SELECT count(*) FROM match_events WHERE match_id = $1::uuid";
    let on_primary: i64 = sqlx::query_scalar(count)
        .bind(&match_id)
        .fetch_one(&primary)
        .await
        .unwrap();
    let on_standby: i64 = sqlx::query_scalar(count)
        .bind(&match_id)
        .fetch_one(&standby)
        .await
        .unwrap();
    assert!(
        on_standby < on_primary,
        "the paused standby lags ({on_standby} of {on_primary} events)"
    );
    // A stream from the beginning, read until it has sent as many events as the primary holds.
    let response = client
        .http
        .get(format!(
            "{}/v1/matches/{match_id}/stream?after=0",
            client.base
        ))
        .bearer_auth(&seats[0].token)
        .send()
        .await
        .expect("a stream");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut seqs: Vec<i64> = Vec::new();
    while (seqs.len() as i64) < on_primary {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the stream's catch-up arrives")
            .expect("the stream stays open")
            .expect("a chunk");
        text.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            if let Some(data) = block.lines().find_map(|line| line.strip_prefix("data:")) {
                let event: Value = serde_json::from_str(data.trim()).expect("JSON");
                seqs.push(event["seq"].as_i64().expect("seq"));
            }
        }
    }
    assert_eq!(
        seqs,
        (1..=on_primary).collect::<Vec<_>>(),
        "catch-up with no gap"
    );
    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&standby)
        .await
        .unwrap();
    Cluster::run(state, &["patronictl", "resume", "--wait"]);
    standby.close().await;
    primary.close().await;
    eprintln!(
        "ha: standby replay paused: 10 shots in {:.2} s; the standby had {on_standby} of {on_primary} events; \
         a stream from the beginning got all {on_primary} (catch-up fell back to the primary)",
        shots_took.as_secs_f64()
    );
}

/// A replica whose standby is gone (its read pool points at a port nobody listens on)
/// serves every read that may lag from the primary: lists, a profile, the ladder and a
/// stream's catch-up, with no 503.
#[sqlx::test]
async fn reads_that_may_lag_fall_back_to_the_primary_when_the_standby_is_gone(pool: sqlx::PgPool) {
    statki::store::migrate(&pool).await.expect("migrations");
    let gone = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy("postgres://postgres@127.0.0.1:1/none")
        .unwrap();
    let core = statki::app::App::with_reader(
        pool.clone(),
        Some(gone.clone()),
        common::standard_settings(),
        statki::auth::Tokens::new(common::SECRET).unwrap(),
    );
    let live = statki::live::Hub::start_with_reader(&pool, Some(&gone), Default::default());
    let router = statki::http::app(
        statki::http::state(core.clone(), live.clone()),
        &common::test_http_settings(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let app = common::TestApp {
        address,
        client: reqwest::Client::new(),
        pool,
        app: core,
        live,
    };

    let (match_id, first, _second) = app.battle_match("statki").await;
    let profile = app.get(&format!("/v1/players/{}", first.id), None).await;
    assert_eq!(profile.status, StatusCode::OK, "{:?}", profile.body);
    assert_eq!(profile.body["id"], first.id.as_str());
    let ladder = app.get("/v1/ladder/statki", None).await;
    assert_eq!(ladder.status, StatusCode::OK, "{:?}", ladder.body);
    let mine = app
        .get(
            &format!("/v1/players/{}/matches", first.id),
            Some(&first.token),
        )
        .await;
    assert_eq!(mine.status, StatusCode::OK, "{:?}", mine.body);
    assert_eq!(mine.body["matches"][0]["id"], match_id.as_str());
    let live_list = app.get("/v1/matches?status=live", Some(&first.token)).await;
    assert_eq!(live_list.status, StatusCode::OK, "{:?}", live_list.body);

    let events = app
        .get(
            &format!("/v1/matches/{match_id}/events"),
            Some(&first.token),
        )
        .await;
    let expected = events.body.as_array().expect("events").len();
    let response = app
        .client
        .get(app.url(&format!("/v1/matches/{match_id}/stream?after=0")))
        .bearer_auth(&first.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut seen = 0;
    while seen < expected {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the catch-up arrives")
            .expect("the stream stays open")
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        seen = text.matches("\ndata:").count() + usize::from(text.starts_with("data:"));
    }
    assert_eq!(seen, expected, "every event in the catch-up");
}
