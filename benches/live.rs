//! Load generator for live updates: many concurrent match streams on one replica, memory
//! per idle stream, what streams cost the shots, and the delay from commit to delivery (one
//! replica, or two).
//!
//! It starts the `statki` server binary as a separate process (so the server's memory is
//! measured alone, from `/proc/<pid>/status`), sets up battle matches over HTTP, and then,
//! in one run:
//!
//! 1. fires shots as fast as `--connections` keep-alive connections allow for `--seconds`,
//!    round-robin over every match (each shot by the player on turn), with no stream open;
//! 2. opens two streams per match (one per player) over loopback and reads the memory per
//!    idle stream;
//! 3. repeats 1 with every stream open (each reading every event), and prints the ratio;
//! 4. fires `--shots` shots at `--rate` per second and times each `shot_fired` event from
//!    its `at` (stamped inside the committing transaction, just before commit, so the
//!    figure is an upper bound) to its arrival on both players' streams.
//!
//! ```text
//! ulimit -n 20000          # each stream is a socket on both ends
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo bench --bench live -- --streams 10000
//! cargo bench --bench live -- --streams 10000 --replicas 2    # streams on one, shots via the other
//! ```
//! The bench owns the database `statki_live_bench` on that server: it is dropped and
//! created afresh. A tiny HTTP/1.1 client is built in, as the bench needs nothing more and
//! runtime dependencies stay those of the service.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use chrono::{DateTime, Utc};
use clap::Parser;
use serde_json::{Value, json};
use sqlx::migrate::MigrateDatabase;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;

#[derive(Parser, Debug)]
#[command(about = "Live-update load generator: memory per stream, commit-to-delivery delay")]
struct Args {
    /// Streams to open (two per match, one for each player).
    #[arg(long, default_value_t = 10_000)]
    streams: usize,
    /// Replicas to start on the one database; with 2, streams are on the first and shots
    /// go through the second.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Shots fired at `--rate` while deliveries are timed (round-robin over the matches).
    #[arg(long, default_value_t = 10_000)]
    shots: usize,
    /// Shots per second while deliveries are timed.
    #[arg(long, default_value_t = 2_000)]
    rate: u32,
    /// Keep-alive connections firing shots in the throughput runs (0: skip them).
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Length of each throughput run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// PostgreSQL server; the bench uses (and recreates) its own database there.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    database_url: String,
    /// The server binary (default: the `statki` binary cargo built with this bench).
    #[arg(long)]
    server_bin: Option<std::path::PathBuf>,
    /// First loopback port for the replicas.
    #[arg(long, default_value_t = 18_080)]
    port: u16,
    /// Use running replicas at these addresses instead of starting servers (loopback
    /// only); their database must be one the bench may fill.
    #[arg(long, value_delimiter = ',')]
    connect: Vec<SocketAddr>,
    /// With --connect: the first replica's process id, to read its memory.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Concurrent requests while setting up and opening streams.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Passed by `cargo bench` to every bench target; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

const BENCH_DATABASE: &str = "statki_live_bench";

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.streams < 2 {
        bail!("need at least 2 streams");
    }
    check_fd_limit(args.streams)?;
    if !args.connect.is_empty() {
        if args
            .connect
            .iter()
            .any(|address| !address.ip().is_loopback())
        {
            bail!("loopback addresses only");
        }
        let pid = args
            .server_pid
            .ok_or_else(|| anyhow!("--connect needs --server-pid"))?;
        return run(&args, &args.connect, pid).await;
    }
    let database_url = bench_database_url(&args.database_url)?;
    if sqlx::Postgres::database_exists(&database_url).await? {
        sqlx::Postgres::force_drop_database(&database_url).await?;
    }
    let server_bin = match &args.server_bin {
        Some(path) => path.clone(),
        None => std::path::PathBuf::from(env!("CARGO_BIN_EXE_statki")),
    };
    let mut replicas = Vec::new();
    for index in 0..args.replicas.max(1) {
        let address: SocketAddr = ([127, 0, 0, 1], args.port + index as u16).into();
        let child = start_server(&server_bin, &database_url, address, args.streams).await?;
        replicas.push((address, child));
    }
    let addresses: Vec<SocketAddr> = replicas.iter().map(|(address, _)| *address).collect();
    let pid = replicas[0].1.id().ok_or_else(|| anyhow!("server exited"))?;
    let outcome = run(&args, &addresses, pid).await;
    for (_, child) in &mut replicas {
        let _ = child.kill().await;
    }
    outcome?;
    sqlx::Postgres::force_drop_database(&database_url).await?;
    Ok(())
}

fn check_fd_limit(streams: usize) -> Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    let soft: Option<usize> = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|value| value.parse().ok());
    match soft {
        Some(soft) if soft < streams + 512 => {
            bail!(
                "open-file limit {soft} is too low for {streams} streams: run `ulimit -n {}` first",
                streams + 1024
            )
        }
        _ => Ok(()),
    }
}

fn bench_database_url(url: &str) -> Result<String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let slash = base
        .rfind('/')
        .filter(|&index| index > "postgres://".len())
        .ok_or_else(|| anyhow!("DATABASE_URL needs a database path"))?;
    let mut bench = format!("{}/{BENCH_DATABASE}", &base[..slash]);
    if let Some(query) = query {
        bench.push('?');
        bench.push_str(query);
    }
    Ok(bench)
}

async fn start_server(
    bin: &std::path::Path,
    database_url: &str,
    address: SocketAddr,
    streams: usize,
) -> Result<Child> {
    let child = Command::new(bin)
        .env("DATABASE_URL", database_url)
        .env("STATKI_LISTEN", address.to_string())
        .env("STATKI_JWT_SECRET", "live-bench-secret-live-bench-secret")
        // No clock may run out while the bench is set up and measured.
        .env("STATKI_PLACEMENT_SECONDS", "36000")
        .env("STATKI_SHOT_SECONDS", "36000")
        .env("STATKI_REQUEST_TIMEOUT_SECONDS", "120")
        .env("STATKI_STREAMS_PER_REPLICA", (streams + 100).to_string())
        .env("STATKI_RATE_LIMITS", "false")
        .env("STATKI_MAX_CONNECTIONS", (streams + 1000).to_string())
        .env("STATKI_MAX_CONNECTIONS_PER_ADDRESS", "0")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} (cargo build --release --bins)", bin.display()))?;
    let started = Instant::now();
    loop {
        if let Ok(mut conn) = Conn::connect(address).await
            && let Ok((200, _)) = conn.request("GET", "/readyz", None, None).await
        {
            return Ok(child);
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("the server on {address} did not become ready");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .ok_or_else(|| anyhow!("no VmRSS for {pid}"))
}

struct Game {
    id: String,
    /// The two players' tokens and ids, the one on turn first.
    players: [(String, String); 2],
    /// The match's last event.
    seq: std::sync::atomic::AtomicI64,
    /// Shots fired in it.
    shots: AtomicUsize,
}

struct Delivery {
    /// From the event's `at` to its arrival.
    from_commit: Duration,
}

async fn run(args: &Args, replicas: &[SocketAddr], server_pid: u32) -> Result<()> {
    let stream_replica = replicas[0];
    let shot_replica = replicas[replicas.len() - 1];
    let matches = args.streams / 2;

    let started = Instant::now();
    let games = setup(stream_replica, matches, args.concurrency).await?;
    println!(
        "set up {matches} battle matches in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let board = Arc::new(Board::new(games));

    let quiet = if args.connections > 0 {
        let run = throughput(shot_replica, &board, args.connections, args.seconds).await?;
        println!("no streams: {}", run.line());
        Some(run)
    } else {
        None
    };

    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_kib(server_pid)?;

    let deliveries: Arc<Mutex<Vec<Delivery>>> = Arc::new(Mutex::new(Vec::new()));
    let timing = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let gate = Arc::new(Semaphore::new(args.concurrency * 4));
    let mut openers = Vec::new();
    for game in &board.games {
        for (token, _) in &game.players {
            let path = format!("/v1/matches/{}/stream", game.id);
            let (token, seq) = (token.clone(), game.seq.load(Ordering::Relaxed));
            let (deliveries, timing, open, ended, gate) = (
                deliveries.clone(),
                timing.clone(),
                open.clone(),
                ended.clone(),
                gate.clone(),
            );
            openers.push(tokio::spawn(async move {
                let permit = gate.acquire_owned().await?;
                let stream = SseStream::open(stream_replica, &path, &token, seq).await?;
                drop(permit);
                open.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    stream.follow(deliveries, timing).await;
                    ended.fetch_add(1, Ordering::Relaxed);
                });
                anyhow::Ok(())
            }));
        }
    }
    for opener in openers {
        opener.await??;
    }
    let opened = open.load(Ordering::Relaxed);
    println!(
        "opened {opened} streams in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = rss_kib(server_pid)?;
    let per_stream = (after.saturating_sub(before)) as f64 * 1024.0 / opened as f64;

    let watched = if args.connections > 0 {
        let run = throughput(shot_replica, &board, args.connections, args.seconds).await?;
        println!("{opened} streams: {}", run.line());
        Some(run)
    } else {
        None
    };
    // Every event of those shots reaches its streams before the timed shots start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    deliveries.lock().map_err(|_| anyhow!("poisoned"))?.clear();
    timing.store(true, Ordering::Relaxed);

    // Shots at a fixed rate, round-robin over the matches, on a pool of connections.
    let interval = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (pool_tx, pool_rx) = tokio::sync::mpsc::channel(args.concurrency);
    for _ in 0..args.concurrency {
        pool_tx.send(Conn::connect(shot_replica).await?).await?;
    }
    let pool = Arc::new(tokio::sync::Mutex::new(pool_rx));
    let fired = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut shooters = Vec::new();
    for _ in 0..args.shots {
        ticker.tick().await;
        let (board, fired, pool, pool_tx) =
            (board.clone(), fired.clone(), pool.clone(), pool_tx.clone());
        shooters.push(tokio::spawn(async move {
            let mut conn = pool
                .lock()
                .await
                .recv()
                .await
                .ok_or_else(|| anyhow!("no connection"))?;
            let shot = board.fire(&mut conn).await?;
            let _ = pool_tx.send(conn).await;
            if shot.is_some() {
                fired.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    for shooter in shooters {
        shooter.await??;
    }
    let firing = started.elapsed();
    let fired = fired.load(Ordering::Relaxed);
    let expected = fired * 2;
    let deadline = Instant::now() + Duration::from_secs(30);
    while deliveries.lock().map(|d| d.len()).unwrap_or(0) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut delays: Vec<f64> = deliveries
        .lock()
        .map_err(|_| anyhow!("poisoned"))?
        .iter()
        .map(|delivery| delivery.from_commit.as_secs_f64() * 1000.0)
        .collect();
    delays.sort_by(f64::total_cmp);
    let rss_end = rss_kib(server_pid)?;

    println!();
    println!("## live_bench results");
    println!(
        "replicas: {} ({})",
        replicas.len(),
        if replicas.len() > 1 {
            "streams on the first, shots through the second"
        } else {
            "streams and shots on one"
        }
    );
    println!(
        "streams open: {opened} ({matches} matches x 2 players); ended early: {}",
        ended.load(Ordering::Relaxed)
    );
    println!(
        "server RSS: {before} KiB before streams, {after} KiB with them idle -> {:.1} KiB per idle stream",
        per_stream / 1024.0
    );
    if let (Some(quiet), Some(watched)) = (&quiet, &watched) {
        println!(
            "shots at {} connections: no streams {}; {opened} streams {} -> {:.2}x",
            args.connections,
            quiet.line(),
            watched.line(),
            watched.rate() / quiet.rate()
        );
    }
    println!(
        "timed shots: {fired} fired in {:.1} s ({:.0}/s asked {}/s); deliveries {} of {expected}",
        firing.as_secs_f64(),
        fired as f64 / firing.as_secs_f64(),
        args.rate,
        delays.len()
    );
    println!(
        "commit -> delivery (ms): p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
        percentile(&delays, 0.50),
        percentile(&delays, 0.90),
        percentile(&delays, 0.99),
        delays.last().copied().unwrap_or(f64::NAN)
    );
    println!("server RSS after the shots: {rss_end} KiB");
    if delays.len() < expected {
        bail!("{} deliveries missing", expected - delays.len());
    }
    Ok(())
}

/// Every match with where its shots stand: shot `n` of a match is fired by the player on
/// turn (they alternate, every shot a miss) at the `n / 2`-th cell the fleets leave empty.
/// The matches take turns in a queue, so no two shots of one match are ever in flight.
struct Board {
    games: Vec<Game>,
    queue: Mutex<std::collections::VecDeque<usize>>,
}

/// Cells `FLEET` leaves empty in both seas: the even rows.
fn empty_cell(index: usize) -> Option<String> {
    let row = 2 + 2 * (index / 10);
    (row <= 10).then(|| format!("{}{row}", char::from(b'A' + (index % 10) as u8)))
}

impl Board {
    fn new(games: Vec<Game>) -> Self {
        Board {
            queue: Mutex::new((0..games.len()).collect()),
            games,
        }
    }

    /// Fires the next shot of the next match in the queue: its latency, or `None` when
    /// every match has shot every empty cell.
    async fn fire(&self, conn: &mut Conn) -> Result<Option<Duration>> {
        let Some(index) = self
            .queue
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .pop_front()
        else {
            return Ok(None);
        };
        let game = &self.games[index];
        let shot = game.shots.load(Ordering::Relaxed);
        let Some(cell) = empty_cell(shot / 2) else {
            return Ok(None);
        };
        let started = Instant::now();
        let (status, body) = conn
            .request(
                "POST",
                &format!("/v1/matches/{}/shots", game.id),
                Some(&game.players[shot % 2].0),
                Some(&json!({ "cell": cell })),
            )
            .await?;
        let latency = started.elapsed();
        if status != 200 {
            bail!("shot refused: {status} {body}");
        }
        game.shots.store(shot + 1, Ordering::Relaxed);
        if let Some(seq) = body["seq"].as_i64() {
            game.seq.store(seq, Ordering::Relaxed);
        }
        self.queue
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .push_back(index);
        Ok(Some(latency))
    }
}

/// One throughput run: shots answered, in how long, and their latencies.
struct Throughput {
    latencies: Vec<f64>,
    seconds: f64,
}

impl Throughput {
    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.seconds
    }

    fn line(&self) -> String {
        format!(
            "{:.0} shots/s (p50 {:.1} ms, p99 {:.1} ms)",
            self.rate(),
            percentile(&self.latencies, 0.50),
            percentile(&self.latencies, 0.99)
        )
    }
}

/// Fires shots on `connections` keep-alive connections for `seconds`, as fast as they are
/// answered.
async fn throughput(
    address: SocketAddr,
    board: &Arc<Board>,
    connections: usize,
    seconds: f64,
) -> Result<Throughput> {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..connections {
        let board = board.clone();
        workers.push(tokio::spawn(async move {
            let mut conn = Conn::connect(address).await?;
            let mut latencies = Vec::new();
            while Instant::now() < until {
                match board.fire(&mut conn).await? {
                    Some(latency) => latencies.push(latency.as_secs_f64() * 1000.0),
                    None => break,
                }
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await??);
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    Ok(Throughput { latencies, seconds })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

const FLEET: [&str; 5] = ["A1", "A3", "A5", "A7", "A9"];

async fn setup(address: SocketAddr, matches: usize, concurrency: usize) -> Result<Vec<Game>> {
    let next = Arc::new(AtomicUsize::new(0));
    let games = Arc::new(Mutex::new(Vec::with_capacity(matches)));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (next, games) = (next.clone(), games.clone());
        workers.push(tokio::spawn(async move {
            let mut conn = Conn::connect(address).await?;
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= matches {
                    return anyhow::Ok(());
                }
                let game = setup_one(&mut conn, index).await?;
                games.lock().map_err(|_| anyhow!("poisoned"))?.push(game);
            }
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let games = std::mem::take(&mut *games.lock().map_err(|_| anyhow!("poisoned"))?);
    Ok(games)
}

async fn setup_one(conn: &mut Conn, index: usize) -> Result<Game> {
    let mut players = Vec::new();
    for side in ["a", "b"] {
        let (status, body) = conn
            .request(
                "POST",
                "/v1/players",
                None,
                Some(&json!({ "name": format!("b{}-{index}-{side}", run_tag()) })),
            )
            .await?;
        if status != 201 {
            bail!("register: {status} {body}");
        }
        players.push((field(&body, "token")?, field(&body, "id")?));
    }
    let (status, body) = conn
        .request(
            "POST",
            "/v1/matches",
            Some(&players[0].0),
            Some(&json!({ "ruleset": "statki" })),
        )
        .await?;
    if status != 201 {
        bail!("create: {status} {body}");
    }
    let id = field(&body, "id")?;
    let (status, body) = conn
        .request(
            "POST",
            &format!("/v1/matches/{id}/join"),
            Some(&players[1].0),
            None,
        )
        .await?;
    if status != 200 {
        bail!("join: {status} {body}");
    }
    let ships: Vec<Value> = FLEET
        .iter()
        .map(|bow| json!({ "cell": bow, "orientation": "horizontal" }))
        .collect();
    let mut last = Value::Null;
    for (token, _) in &players {
        let (status, body) = conn
            .request(
                "PUT",
                &format!("/v1/matches/{id}/fleet"),
                Some(token),
                Some(&json!({ "ships": ships })),
            )
            .await?;
        if status != 200 {
            bail!("fleet: {status} {body}");
        }
        last = body;
    }
    let turn = field(&last, "turn")?;
    let seq = last["seq"].as_i64().unwrap_or(0);
    if players[1].1 == turn {
        players.swap(0, 1);
    }
    let [first, second]: [(String, String); 2] = players
        .try_into()
        .map_err(|_| anyhow!("two players expected"))?;
    Ok(Game {
        id,
        players: [first, second],
        seq: seq.into(),
        shots: AtomicUsize::new(0),
    })
}

fn field(body: &Value, name: &str) -> Result<String> {
    body[name]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no `{name}` in {body}"))
}

/// A keep-alive HTTP/1.1 connection to a loopback server.
struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    async fn connect(address: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream: BufReader::new(stream),
        })
    }

    async fn send_head(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        extra: &str,
        body: &[u8],
    ) -> Result<()> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}");
        if let Some(token) = token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if !body.is_empty() {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let socket = self.stream.get_mut();
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(body).await?;
        Ok(())
    }

    /// Status and headers (lower-cased names).
    async fn read_head(&mut self) -> Result<(u16, HashMap<String, String>)> {
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| anyhow!("bad status line {line:?}"))?;
        let mut headers = HashMap::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                return Ok((status, headers));
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
    }

    /// One chunk of a chunked body; `None` at its end.
    async fn read_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)?;
        let mut chunk = vec![0; size + 2];
        self.stream.read_exact(&mut chunk).await?;
        chunk.truncate(size);
        Ok((size > 0).then_some(chunk))
    }

    async fn request(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()?
            .unwrap_or_default();
        self.send_head(method, path, token, "", &body).await?;
        let (status, headers) = self.read_head().await?;
        let mut bytes = Vec::new();
        if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
            while let Some(chunk) = self.read_chunk().await? {
                bytes.extend_from_slice(&chunk);
            }
        } else {
            let length: usize = headers
                .get("content-length")
                .and_then(|value| value.parse().ok())
                .unwrap_or(0);
            bytes.resize(length, 0);
            self.stream.read_exact(&mut bytes).await?;
        }
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }
}

/// An open event stream.
struct SseStream {
    conn: Conn,
}

impl SseStream {
    async fn open(address: SocketAddr, path: &str, token: &str, after: i64) -> Result<SseStream> {
        let mut conn = Conn::connect(address).await?;
        let extra = format!("Accept: text/event-stream\r\nLast-Event-ID: {after}\r\n");
        conn.send_head("GET", path, Some(token), &extra, &[])
            .await?;
        let (status, _) = conn.read_head().await?;
        if status != 200 {
            bail!("stream refused: {status}");
        }
        Ok(SseStream { conn })
    }

    /// Reads events until the stream ends, timing every `shot_fired` while `timing` is
    /// set (otherwise it only reads, so the client's parsing takes no CPU from the server
    /// while shots are counted).
    async fn follow(mut self, deliveries: Arc<Mutex<Vec<Delivery>>>, timing: Arc<AtomicBool>) {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = self.conn.read_chunk().await {
            if !timing.load(Ordering::Relaxed) {
                buffer.clear();
                continue;
            }
            let arrived = Utc::now();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let Some(data) = block.lines().find_map(|line| line.strip_prefix("data: ")) else {
                    continue;
                };
                let Ok(event) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if event["kind"] != "shot_fired" {
                    continue;
                }
                let Some(at) = event["at"]
                    .as_str()
                    .and_then(|at| at.parse::<DateTime<Utc>>().ok())
                else {
                    continue;
                };
                let from_commit = (arrived - at).to_std().unwrap_or_default();
                if let Ok(mut deliveries) = deliveries.lock() {
                    deliveries.push(Delivery { from_commit });
                }
            }
        }
    }
}

/// Tells this run's players apart from an earlier run's on a reused database.
fn run_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| format!("{:x}", Utc::now().timestamp_millis() % 0xff_ffff))
}
