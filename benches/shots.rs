//! Load generator for the shot path: runs the real `statki` binary against PostgreSQL,
//! plays many matches concurrently over loopback HTTP, and prints throughput, latency
//! percentiles and the service's CPU time per shot (read from /proc, so client work is
//! not counted).
//!
//! `DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo bench --bench shots`
//! (optional: `SHOTS_MATCHES=40` concurrent matches, `SHOTS_ROUNDS=3` matches each).
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
async fn prepare(client: &Client, pair: usize, round: usize) -> Ready {
    let a = register(client, &format!("load-a-{pair}-{round}")).await;
    let b = register(client, &format!("load-b-{pair}-{round}")).await;
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
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_statki"))
        .env("DATABASE_URL", &url)
        .env("STATKI_LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "STATKI_JWT_SECRET",
            "bench-secret-bench-secret-bench-secret",
        )
        .env("STATKI_RATE_LIMITS", "false")
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
    let matches = env_or("SHOTS_MATCHES", 40);
    let rounds = env_or("SHOTS_ROUNDS", 3);
    let client = std::sync::Arc::new(client);
    // Set every match up first, so the CPU measured below is the shots' alone.
    let mut prepared = Vec::new();
    for round in 0..rounds {
        let setups: Vec<_> = (0..matches)
            .map(|pair| {
                let client = client.clone();
                tokio::spawn(async move { prepare(&client, pair, round).await })
            })
            .collect();
        for setup in setups {
            prepared.push(setup.await.unwrap());
        }
    }
    let cpu_before = cpu_seconds(server.id());
    let started = Instant::now();
    let mut queues: Vec<Vec<Ready>> = (0..matches).map(|_| Vec::new()).collect();
    for (n, ready) in prepared.into_iter().enumerate() {
        queues[n % matches].push(ready);
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
    let wall = started.elapsed();
    let cpu = cpu_seconds(server.id()) - cpu_before;
    latencies.sort();
    let shots = latencies.len();
    println!(
        "shot path: {matches} concurrent matches × {rounds}, {shots} shots in {:.2} s",
        wall.as_secs_f64()
    );
    println!(
        "  throughput      {:.0} shots/s",
        shots as f64 / wall.as_secs_f64()
    );
    println!(
        "  latency p50     {:.2} ms",
        percentile(&latencies, 0.50).as_secs_f64() * 1e3
    );
    println!(
        "  latency p99     {:.2} ms",
        percentile(&latencies, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "  latency max     {:.2} ms",
        latencies.last().unwrap().as_secs_f64() * 1e3
    );
    println!(
        "  service CPU     {:.0} µs per shot (statki process, user + system, shooting phase only)",
        cpu / shots as f64 * 1e6
    );
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
