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
//! `STATKI_BIN=` another build of the service to measure instead of this one,
//! `SHOTS_KEEP=1` keeps the database afterwards, `SHOTS_PGBENCH_ROUTED=1` runs pgbench's
//! shot in the form Citus routes, also on plain PostgreSQL).
//!
//! On Citus (`DATABASE_URL` at the coordinator's `postgres` database) the database is a
//! distributed one, and the figures cover every node: WAL of all nodes, row updates of every
//! shard of `matches`, deadlocks of every node, the two-phase commits recorded in
//! `pg_dist_transaction` (count them with the coordinator's `citus.recover_2pc_interval`
//! at -1, since a recovery deletes the records it settles), and the CPU per shot of each
//! node's PostgreSQL processes when the nodes run on this machine.
//!
//! `STATKI_BENCH_IN_PLAY=10000` measures with that many matches in play instead: it first
//! brings them to their first shot through the API (64 at a time), then fires round-robin
//! shots over a working set of them (`STATKI_BENCH_WORKING_SET`, default all) for
//! `SHOTS_SECONDS` (default 10) at each of `SHOTS_CONNECTIONS`, each connection owning its
//! share of the matches, then the hostile order at 64 connections: every remaining shot of
//! both seats of `STATKI_BENCH_HOSTILE_MATCHES` (default 64) other matches, shuffled, so one
//! match often has several in flight (out-of-turn shots are answered 409 and counted apart).
//! Each mode prints shots/s, p50, p99 and the change in `pg_stat_database.deadlocks`; each
//! round-robin run is followed by `pgbench`'s naive shot on the same database with as many
//! clients, and prints the ratio and the database's CPU per shot (every PostgreSQL process
//! of the server, from /proc). Nothing analyses the database first: it is measured as the
//! players made it, with whatever statistics (none, with autovacuum off) it has.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service;

use std::time::{Duration, Instant};

use serde_json::json;
use service::{
    COLUMNS, Client, Figures, Live, Ready, Server, Work, checkpoint, cpu_seconds, database_nodes,
    database_url, deadlocks, drop_database, env_or, fill, median, nodes_cpu_per, nodes_cpu_seconds,
    percentile, play, prepare, print_mode, round_robin, run_pgbench, settle_statistics,
};

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
    let nodes = database_nodes(db).await;
    let work_before = Work::read(db).await;
    let nodes_before = nodes_cpu_seconds(&nodes);
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
    let nodes_after = nodes_cpu_seconds(&nodes);
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
        nodes_cpu: nodes_cpu_per(&nodes, &nodes_before, &nodes_after, latencies.len()),
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

/// The shot path with `in_play` matches in play: round-robin at each connection count, then
/// the hostile order at 64.
async fn run_in_play(
    client: &std::sync::Arc<Client>,
    admin: &sqlx::PgPool,
    url: &str,
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
    let nodes = database_nodes(admin).await;
    let mut before = deadlocks(admin).await;
    for &c in connections {
        let cpu_before = nodes_cpu_seconds(&nodes);
        let (back, mut latencies, took) = round_robin(client, matches, c, seconds).await;
        let cpu_after = nodes_cpu_seconds(&nodes);
        matches = back;
        let after = deadlocks(admin).await;
        print_mode(
            &format!("round-robin, {c} connections"),
            &mut latencies,
            took,
            after - before,
        );
        let shots = latencies.len();
        for (node, cpu) in nodes_cpu_per(&nodes, &cpu_before, &cpu_after, shots) {
            println!("    {node} CPU per shot {:.0} µs", cpu * 1e6);
        }
        let naive = run_pgbench(url, admin, c, seconds as u64).await;
        naive.print();
        println!(
            "    ratio statki/pgbench {:.2}× ({c} connections)",
            shots as f64 / took / naive.rate()
        );
        before = deadlocks(admin).await;
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
    let url = database_url(&base_url, &database);
    let in_play = env_or("STATKI_BENCH_IN_PLAY", 0);
    // Setting matches up (and filling, with matches in play) can take longer than a turn
    // clock on a loaded machine: no match may time out meanwhile.
    let long_clocks: &[(&str, &str)] = &[
        ("STATKI_PLACEMENT_SECONDS", "36000"),
        ("STATKI_SHOT_SECONDS", "36000"),
    ];
    let server = Server::start(&url, long_clocks).await;
    let connections: Vec<usize> = std::env::var("SHOTS_CONNECTIONS")
        .unwrap_or_else(|_| "8,64".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let rounds = env_or("SHOTS_ROUNDS", 3);
    let pgbench_seconds = env_or("SHOTS_PGBENCH_SECONDS", 10) as u64;
    let client = server.client.clone();
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .expect("bench database");
    let repeats = env_or("SHOTS_REPEATS", 3).max(1);
    if service::citus(&admin).await {
        let (tables, workers): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM pg_dist_partition),
                    (SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0)",
        )
        .fetch_one(&admin)
        .await
        .unwrap();
        println!(
            "Citus: {database} has {tables} distributed or reference tables on {workers} workers"
        );
    }
    if in_play > 0 {
        run_in_play(&client, &admin, &url, in_play, &connections).await;
    }
    let mut deadlocks_before = if in_play == 0 {
        deadlocks(&admin).await
    } else {
        0
    };
    for &c in connections.iter().filter(|_| in_play == 0) {
        let batches_before = batch_counters(&client).await;
        let mut runs = Vec::with_capacity(repeats);
        for run in 1..=repeats {
            let tag = format!("c{c}r{run}");
            let service = run_service(&client, &admin, server.process.id(), c, rounds, &tag).await;
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
        let deadlocks_after = deadlocks(&admin).await;
        println!(
            "  command batches: {} decided from kept states, {} under locks, {} relocked; \
             deadlocks +{} (every node)",
            batches[0] - batches_before[0],
            batches[1] - batches_before[1],
            batches[2] - batches_before[2],
            deadlocks_after - deadlocks_before,
        );
        deadlocks_before = deadlocks_after;
        println!(
            "shot path, {c} connections, median of {repeats} runs: statki {service_rate:.0}/s \
             (p99 {p99:.2} ms, CPU/shot {cpu:.0} µs), pgbench {naive_rate:.0}/s, \
             ratio {:.2}×",
            service_rate / naive_rate
        );
    }
    admin.close().await;
    server.stop();
    if std::env::var("SHOTS_KEEP").is_ok_and(|v| v == "1") {
        println!("kept the database {database}");
    } else {
        drop_database(&base_url, &database).await;
    }
}
