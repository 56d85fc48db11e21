//! Exports beside a victim (issue 38, item 9): one player pulls exports on 8 connections
//! as fast as they are answered, while another pair plays matches; prints the victim's shot
//! latency (p50, p99) and what the exporter got (answers, bytes, 429s). Three runs on one
//! `statki` binary each: the victim alone, then beside the exporter with the export byte
//! budgets off (`STATKI_RATE_LIMITS=false`, as before the budgets), then with them on (the
//! request limits raised out of the way, so only the byte budgets act).
//!
//! `DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo bench --bench exports`
//! (optional: `EXPORTS_SECONDS=10` per run, `EXPORTS_CONNECTIONS=8`, `EXPORTS_MATCHES=20`
//! finished matches of the exporter's, `STATKI_BIN=` another build of the service).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use service::{
    Client, Server, database_url, drop_database, env_or, percentile, play, prepare, prepare_for,
    register,
};

/// What the exporter got.
#[derive(Default)]
struct Pulled {
    answered: AtomicU64,
    refused: AtomicU64,
    bytes: AtomicU64,
}

/// The exporter: `connections` loops, each pulling the player's export and a match's
/// export in turn until `stop`.
fn exporter(
    client: &Arc<Client>,
    token: &str,
    player: &str,
    matches: &[String],
    connections: usize,
    stop: &Arc<AtomicBool>,
    pulled: &Arc<Pulled>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..connections)
        .map(|n| {
            let (client, stop, pulled) = (client.clone(), stop.clone(), pulled.clone());
            let token = token.to_owned();
            let paths = [
                format!("/v1/players/{player}/matches/export"),
                format!("/v1/matches/{}/export", matches[n % matches.len()]),
            ];
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut turn = 0;
                while !stop.load(Ordering::Relaxed) {
                    let path = &paths[turn % paths.len()];
                    turn += 1;
                    let Ok(response) = http
                        .get(format!("{}{path}", client.base))
                        .bearer_auth(&token)
                        .send()
                        .await
                    else {
                        continue;
                    };
                    let status = response.status().as_u16();
                    let body = response.bytes().await.map(|b| b.len()).unwrap_or(0);
                    if status == 429 {
                        pulled.refused.fetch_add(1, Ordering::Relaxed);
                        // A client told to wait does, briefly; an attacker retries soon.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    } else {
                        pulled.answered.fetch_add(1, Ordering::Relaxed);
                        pulled.bytes.fetch_add(body as u64, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect()
}

/// The victim: matches played one after another for `seconds`; every shot's latency.
async fn victim(client: &Client, tag: &str, seconds: u64) -> Vec<Duration> {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut latencies = Vec::new();
    let mut round = 0;
    while Instant::now() < until {
        let ready = prepare(client, &format!("victim-{tag}-{round}")).await;
        latencies.extend(play(client, ready).await);
        round += 1;
    }
    latencies
}

async fn run(base_url: &str, label: &str, env: &[(&str, &str)], exporting: bool) {
    let seconds = env_or("EXPORTS_SECONDS", 10) as u64;
    let connections = env_or("EXPORTS_CONNECTIONS", 8);
    let finished = env_or("EXPORTS_MATCHES", 20);
    let database = format!("statki_bench_exports_{}_{label}", std::process::id());
    let url = database_url(base_url, &database);
    let server = Server::start(&url, env).await;
    let client = server.client.clone();
    // The exporter's finished matches, each against a new opponent.
    let exporter_seat = register(&client, &format!("exporter-{label}")).await;
    let mut matches = Vec::new();
    for n in 0..finished {
        let ready = prepare_for(
            &client,
            exporter_seat.clone(),
            &format!("{label}-{n}"),
            json!({}),
        )
        .await;
        matches.push(ready.id.clone());
        play(&client, ready).await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let pulled = Arc::new(Pulled::default());
    let started = Instant::now();
    let loops = if exporting {
        exporter(
            &client,
            &exporter_seat.1,
            &exporter_seat.0,
            &matches,
            connections,
            &stop,
            &pulled,
        )
    } else {
        Vec::new()
    };
    let mut latencies = victim(&client, label, seconds).await;
    stop.store(true, Ordering::Relaxed);
    for task in loops {
        task.await.unwrap();
    }
    let took = started.elapsed().as_secs_f64();
    latencies.sort();
    let bytes = pulled.bytes.load(Ordering::Relaxed);
    println!(
        "{label:<24} victim: {} shots, p50 {:.1} ms, p99 {:.1} ms | exporter ({connections} connections): {} exports, {:.1} MB ({:.1} MB/s), {} answered 429, over {took:.1} s",
        latencies.len(),
        percentile(&latencies, 0.50).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        pulled.answered.load(Ordering::Relaxed),
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / took,
        pulled.refused.load(Ordering::Relaxed),
    );
    server.stop();
    drop_database(base_url, &database).await;
}

#[tokio::main]
async fn main() {
    let base_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let clocks = [
        ("STATKI_PLACEMENT_SECONDS", "36000"),
        ("STATKI_SHOT_SECONDS", "36000"),
    ];
    // Budgets on; the request limits out of the way (the victim shoots faster than a
    // player's default 50 a second), so only the export byte budgets act.
    let budgets = [
        clocks[0],
        clocks[1],
        ("STATKI_RATE_LIMITS", "true"),
        ("STATKI_PLAYER_PER_SECOND", "100000"),
        ("STATKI_PLAYER_BURST", "100000"),
        ("STATKI_ADDRESS_PER_SECOND", "100000"),
        ("STATKI_ADDRESS_BURST", "100000"),
        ("STATKI_REGISTER_PER_MINUTE", "100000"),
        ("STATKI_REGISTER_BURST", "100000"),
    ];
    run(&base_url, "alone", &clocks, false).await;
    run(&base_url, "exports_no_budgets", &clocks, true).await;
    run(&base_url, "exports_with_budgets", &budgets, true).await;
}
