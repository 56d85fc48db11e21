//! Failover through the load balancer: `scripts/cluster up` starts two replicas of the
//! real binary behind HAProxy; matches are played and followed over event streams through
//! the balancer while each replica in turn is SIGKILLed and started again. Every stream
//! resumes with `Last-Event-ID` and ends up with exactly the match's event log, and every
//! shot the balancer acknowledged is in the log once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::Connection as _;
use sqlx::migrate::MigrateDatabase as _;
const MATCHES: usize = 6;
/// Each player scans rows 3–10; the fleets lie in rows 6–10, so a match lasts about 140 shots.
const FIRST_ROW: u32 = 3;
/// Pause between one match's shots, so the kills land while every match is being played.
const SHOT_PAUSE: Duration = Duration::from_millis(20);
/// The whole test, set-up and clean-up aside.
const BUDGET: Duration = Duration::from_secs(150);

/// `scripts/cluster` with this test's state dir; `down` on drop.
struct Cluster {
    state: PathBuf,
    url: String,
}

impl Cluster {
    fn script(state: &Path) -> Command {
        let mut command =
            Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster"));
        command.env("STATKI_CLUSTER_DIR", state);
        command
    }

    fn run(state: &Path, args: &[&str]) {
        let status = Self::script(state)
            .args(args)
            .status()
            .expect("run scripts/cluster");
        assert!(status.success(), "scripts/cluster {args:?}: {status}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Self::script(&self.state).arg("down").status();
    }
}

/// A base port with the three after it free (balancer and two replicas).
fn free_ports() -> u16 {
    free_ports_from(20_000)
}

/// Like [`free_ports`], searching from its own `base`, so tests of this binary that run at
/// once do not pick the same ports.
fn free_ports_from(base: u16) -> u16 {
    let start = base + (std::process::id() % 20_000) as u16;
    (0..200)
        .map(|step| start.wrapping_add(step * 7))
        .find(|base| {
            (0..3).all(|offset| std::net::TcpListener::bind(("127.0.0.1", base + offset)).is_ok())
        })
        .expect("free ports")
}

/// `DATABASE_URL` with its database replaced by `name`.
fn database_url(name: &str) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL (scripts/test sets it)");
    let (without_query, query) = base.split_once('?').unwrap_or((&base, ""));
    let (server, _) = without_query
        .rsplit_once('/')
        .expect("a database in DATABASE_URL");
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    format!("{server}/{name}{query}")
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
    retries: Arc<AtomicUsize>,
}

impl Client {
    /// Sends a request until it gets an answer from a live replica: a transport error, a
    /// 502/503/504 from the balancer, a 429 or a key still in progress is retried with the
    /// same `Idempotency-Key`, so a retried command runs at most once.
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Value {
        let key = uuid::Uuid::new_v4().to_string();
        for _ in 0..200 {
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
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    return response.json().await.expect("JSON answer");
                }
                Ok(response) => {
                    let status = response.status();
                    let problem: Value = response.json().await.unwrap_or(Value::Null);
                    let retry = matches!(
                        status,
                        StatusCode::BAD_GATEWAY
                            | StatusCode::SERVICE_UNAVAILABLE
                            | StatusCode::GATEWAY_TIMEOUT
                            | StatusCode::TOO_MANY_REQUESTS
                    ) || problem["code"] == "idempotency_key_in_progress";
                    assert!(retry, "{method} {path}: {status} {problem}");
                }
                Err(err) => assert!(!err.is_decode(), "{method} {path}: {err}"),
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{method} {path}: no answer after 200 tries");
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
                            events.extend(crate::common::take_logged_events(&mut buffer));
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
    /// This player's next cell in the scan.
    next: u32,
}

/// The shooter's `n`-th cell: rows 3–10 left to right, top to bottom.
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
        tokio::time::sleep(SHOT_PAUSE).await;
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
                Some(json!({ "name": format!("{side}{round}{suffix}") })),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_and_moves_survive_replicas_being_killed_behind_the_balancer() {
    let name = format!("statki_cluster_{}", std::process::id());
    let url = database_url(&name);
    let state =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cluster-{}", std::process::id()));
    let port = free_ports();
    let output = Cluster::script(&state)
        .args(["up", "--replicas", "2", "--port", &port.to_string()])
        .env("DATABASE_URL", &url)
        .env("STATKI_BIN", env!("CARGO_BIN_EXE_statki"))
        .env("STATKI_DB_POOL", "8")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run scripts/cluster up");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "scripts/cluster up failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cluster = Cluster {
        state,
        url: stdout
            .lines()
            .last()
            .expect("the balancer's URL")
            .trim()
            .to_owned(),
    };
    assert_eq!(cluster.url, format!("http://127.0.0.1:{port}"));

    let client = Client {
        http: reqwest::Client::new(),
        base: cluster.url.clone(),
        retries: Arc::new(AtomicUsize::new(0)),
    };
    let state = cluster.state.clone();
    // Spawned, so a failed assertion still reaches the clean-up below.
    let outcome = tokio::spawn(tokio::time::timeout(BUDGET, async move {
        let mut matches = Vec::new();
        for round in 0..MATCHES {
            matches.push(set_up_match(&client, round).await);
        }
        let acked = Arc::new(AtomicUsize::new(0));
        let mut streams = Vec::new();
        let mut games = Vec::new();
        for (match_id, seats) in matches {
            for seat in &seats {
                streams.push((
                    match_id.clone(),
                    seat.token.clone(),
                    tokio::spawn(follow(client.clone(), match_id.clone(), seat.token.clone())),
                ));
            }
            let token = seats[0].token.clone();
            games.push((match_id.clone(), token, tokio::spawn(play(client.clone(), match_id, seats, acked.clone()))));
        }

        // Kill each replica once, mid-play, and bring it back.
        let mut kills_at = Vec::new();
        for (replica, threshold) in [("1", 150), ("2", 450)] {
            while acked.load(Ordering::Relaxed) < threshold {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            kills_at.push(acked.load(Ordering::Relaxed));
            let state = state.clone();
            tokio::task::spawn_blocking(move || {
                Cluster::run(&state, &["kill", replica]);
                std::thread::sleep(Duration::from_secs(1));
                Cluster::run(&state, &["start", replica]);
            })
            .await
            .unwrap();
        }

        let mut played = Vec::new();
        for (match_id, token, game) in games {
            played.push((match_id, token, game.await.expect("a match played to its end")));
        }
        let total: usize = played.iter().map(|(_, _, shots)| shots.len()).sum();
        assert!(
            kills_at.iter().all(|at| *at < total),
            "both kills happened while matches were played ({kills_at:?} of {total} shots)"
        );

        let mut reconnects = 0;
        for (match_id, token, stream) in streams {
            let (seen, again) = stream.await.expect("a stream followed to its end");
            reconnects += again;
            let log = event_log(&client, &match_id, &token).await;
            // Placements, salts and a sunk ship's name were hidden when the stream sent them
            // and are public now that the match is over, so the parts compared are those
            // that never change.
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
        for (match_id, token, shots) in played {
            let log = event_log(&client, &match_id, &token).await;
            let logged: BTreeSet<(String, String)> = log
                .iter()
                .filter(|event| event["kind"] == "shot_fired")
                .map(|event| {
                    (
                        event["player"].as_str().expect("shooter").to_owned(),
                        event["cell"].as_str().expect("cell").to_owned(),
                    )
                })
                .collect();
            assert_eq!(logged, shots, "match {match_id}: acknowledged shots and the log differ");
        }
        eprintln!(
            "{total} shots in {MATCHES} matches; kills after {kills_at:?} shots; {reconnects} stream reconnects; {} retried requests",
            client.retries.load(Ordering::Relaxed)
        );
        assert!(reconnects > 0, "no stream was cut by a kill, so nothing was tested");
    }))
    .await;
    drop(cluster);
    let _ = sqlx::Postgres::drop_database(&url).await;
    match outcome {
        Ok(finished) => finished.expect("the failover rehearsal finished within its budget"),
        Err(failed) => std::panic::resume_unwind(failed.into_panic()),
    }
}

/// Registrations answered 201 of `names`, each sent by `client` to `url` with the
/// `X-Forwarded-For` `forwarded` gives it (none when `None`).
async fn registrations_created(
    client: &reqwest::Client,
    url: &str,
    names: std::ops::Range<usize>,
    prefix: &str,
    forwarded: impl Fn(usize) -> Option<String>,
) -> usize {
    let mut created = 0;
    for i in names {
        let mut request = client
            .post(format!("{url}/v1/players"))
            .json(&json!({ "name": format!("{prefix}{i}") }));
        if let Some(address) = forwarded(i) {
            request = request.header("x-forwarded-for", address);
        }
        let status = request.send().await.expect("an answer").status();
        assert!(
            status == StatusCode::CREATED || status == StatusCode::TOO_MANY_REQUESTS,
            "{status}"
        );
        created += usize::from(status == StatusCode::CREATED);
    }
    created
}

/// A client that connects from `local` (a loopback address of this machine).
fn client_from(local: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(std::net::IpAddr::from(local)))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

#[cfg(unix)]
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("the file")
        .permissions()
        .mode()
        & 0o777
}

/// Straight to a replica, `X-Forwarded-For` is nobody's word (only the balancer's own
/// address is believed); through the balancer each client keeps its own budget; the
/// balancer's log holds no stream ticket and, like every log of the cluster, is 0600; the
/// replicas connect as an owner that is no superuser.
#[tokio::test]
async fn a_replica_believes_only_the_balancer_whose_log_keeps_no_ticket() {
    let name = format!("statki_cluster_xff_{}", std::process::id());
    let url = database_url(&name);
    let state = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cluster-xff-{}", std::process::id()));
    let port = free_ports_from(41_000);
    let output = Cluster::script(&state)
        .args(["up", "--replicas", "1", "--port", &port.to_string()])
        .env("DATABASE_URL", &url)
        .env("STATKI_BIN", env!("CARGO_BIN_EXE_statki"))
        .env("STATKI_DB_POOL", "4")
        .env("STATKI_REGISTER_BURST", "5")
        .env("STATKI_REGISTER_PER_MINUTE", "1")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run scripts/cluster up");
    assert!(
        output.status.success(),
        "scripts/cluster up failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cluster = Cluster {
        state: state.clone(),
        url: format!("http://127.0.0.1:{port}"),
    };
    let replica = format!("http://127.0.0.1:{}", port + 1);
    let url_of_database = url.clone();
    let outcome = tokio::spawn(async move {
        // Straight to the replica from 127.0.0.1, a new address in the header each time:
        // one budget (the burst of 5), not 30.
        let direct = client_from([127, 0, 0, 1]);
        let created = registrations_created(&direct, &replica, 0..30, "direct", |i| {
            Some(format!("198.51.100.{i}"))
        })
        .await;
        assert_eq!(created, 5, "a forged X-Forwarded-For was believed");

        // Through the balancer, two clients (127.0.0.3 and 127.0.0.4) each get their own
        // budget: the balancer's header is believed, and it names the real client
        // whatever the client wrote before it.
        let mut through = 0;
        for (local, prefix) in [([127, 0, 0, 3], "three"), ([127, 0, 0, 4], "four")] {
            through +=
                registrations_created(&client_from(local), &cluster.url, 0..8, prefix, |_| {
                    Some("203.0.113.9".to_owned())
                })
                .await;
        }
        assert_eq!(
            through, 10,
            "each client behind the balancer has a budget of its own"
        );

        // A ticket in a request through the balancer (refused: after=-1) is not logged.
        let holder = client_from([127, 0, 0, 5]);
        let session: Value = holder
            .post(format!("{}/v1/players", cluster.url))
            .json(&json!({ "name": "ticket-holder" }))
            .send()
            .await
            .expect("register")
            .json()
            .await
            .expect("a session");
        let token = session["token"].as_str().expect("a token");
        let ticket: Value = holder
            .post(format!("{}/v1/stream-tickets", cluster.url))
            .bearer_auth(token)
            .send()
            .await
            .expect("a ticket")
            .json()
            .await
            .expect("a ticket body");
        let ticket = ticket["ticket"].as_str().expect("the ticket").to_owned();
        let refused = holder
            .get(format!(
                "{}/v1/stream?after=-1&ticket={ticket}",
                cluster.url
            ))
            .send()
            .await
            .expect("an answer");
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        // HAProxy writes its log line when the request ends; give it a moment.
        let log_path = state.join("haproxy.log");
        let mut log = String::new();
        for _ in 0..50 {
            log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if log.contains("/v1/stream?") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(log.contains("/v1/stream?after=_&ticket=_"), "{log}");
        assert!(
            !log.contains(&ticket),
            "the balancer logged a ticket:\n{log}"
        );
        #[cfg(unix)]
        for file in [log_path, state.join("replica-1.log")] {
            assert_eq!(mode_of(&file), 0o600, "{}", file.display());
        }

        // Given a superuser's URL, the replicas connect as `statki_owner`, which is none and
        // cannot become one: RESET ROLE, or SET ROLE to a superuser, leads nowhere.
        let admin = sqlx::PgPool::connect(&url_of_database)
            .await
            .expect("admin");
        let users: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT usename::text FROM pg_stat_activity WHERE datname = current_database()
               AND pid <> pg_backend_pid()",
        )
        .fetch_all(&admin)
        .await
        .expect("sessions");
        assert_eq!(users, ["statki_owner"], "the replicas' sessions");
        let password = std::fs::read_to_string(state.join("owner_password")).expect("password");
        #[cfg(unix)]
        assert_eq!(mode_of(&state.join("owner_password")), 0o600);
        let (_, server) = url_of_database
            .split_once('@')
            .expect("DATABASE_URL names a role");
        let owner_url = format!("postgres://statki_owner:{}@{server}", password.trim());
        let mut owner = sqlx::PgConnection::connect(&owner_url)
            .await
            .expect("as the owner");
        sqlx::raw_sql("RESET ROLE")
            .execute(&mut owner)
            .await
            .expect("reset");
        let superuser: String = sqlx::query_scalar("SELECT current_setting('is_superuser')")
            .fetch_one(&mut owner)
            .await
            .expect("is_superuser");
        assert_eq!(superuser, "off");
        let refused = sqlx::query("SET ROLE postgres").execute(&mut owner).await;
        assert!(refused.is_err(), "the owner became the superuser");
        drop(cluster);
    })
    .await;
    let _ = sqlx::Postgres::drop_database(&url).await;
    if let Err(failed) = outcome {
        std::panic::resume_unwind(failed.into_panic());
    }
}

/// The postmaster of the cluster in `data_dir` and its children.
fn postgres_pids(data_dir: &Path) -> Vec<i32> {
    let pid_file = std::fs::read_to_string(data_dir.join("postmaster.pid")).expect("pid file");
    let postmaster: i32 = pid_file
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .expect("postmaster pid");
    let mut pids = vec![postmaster];
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
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

fn signal_all(pids: &[i32], name: &str) {
    for pid in pids {
        let _ = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status();
    }
}

/// The database stops answering for 4 s under load (every PostgreSQL process paused, as a
/// leader that died with its connections open): through the balancer every answer is 200
/// or 503 with Retry-After (issue 38, item 5). The replicas' `/readyz` fails with the
/// database, so the balancer takes them all out and answers new requests with its own 503;
/// the requests a replica already holds are its to answer. Before, HAProxy shut those
/// sessions when it marked the replica down (`on-marked-down shutdown-sessions`): 502s and
/// cut connections (seen: 395 x 200, 339 x 503, 2 x 502, 6 cut).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_is_answered_200_or_503_through_the_balancer() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cluster-outage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let data_dir = root.join("pgdata");
    let database = embedded_pg::EmbeddedPostgres::start(&data_dir)
        .await
        .expect("a private PostgreSQL");
    let state = root.join("cluster");
    let port = free_ports_from(45_000);
    let output = Cluster::script(&state)
        .args(["up", "--replicas", "2", "--port", &port.to_string()])
        .env("DATABASE_URL", database.database_url())
        .env("STATKI_BIN", env!("CARGO_BIN_EXE_statki"))
        .env("STATKI_DB_POOL", "4")
        .env("STATKI_RATE_LIMITS", "false")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run scripts/cluster up");
    assert!(
        output.status.success(),
        "scripts/cluster up failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cluster = Cluster {
        state,
        url: format!("http://127.0.0.1:{port}"),
    };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let session: Value = http
        .post(format!("{}/v1/players", cluster.url))
        .json(&json!({ "name": "steady" }))
        .send()
        .await
        .expect("register")
        .json()
        .await
        .expect("a session");
    let token = session["token"].as_str().expect("token").to_owned();

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let askers: Vec<_> = (0..6)
        .map(|_| {
            let (http, url, token, stop) = (
                http.clone(),
                cluster.url.clone(),
                token.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let answer = http
                        .get(format!("{url}/v1/me"))
                        .bearer_auth(&token)
                        .send()
                        .await;
                    answers.push(match answer {
                        Ok(answer) => (
                            answer.status().as_u16(),
                            answer.headers().contains_key("retry-after"),
                        ),
                        Err(_) => (0, false),
                    });
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let paused = postgres_pids(&data_dir);
    signal_all(&paused, "STOP");
    tokio::time::sleep(Duration::from_secs(4)).await;
    signal_all(&paused, "CONT");
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let mut counts = std::collections::BTreeMap::<u16, usize>::new();
    let mut unavailable_without_retry = 0;
    for asker in askers {
        for (status, retry_after) in asker.await.expect("asker") {
            *counts.entry(status).or_default() += 1;
            unavailable_without_retry += usize::from(status == 503 && !retry_after);
        }
    }
    drop(cluster);
    let _ = database.stop().await;
    let _ = std::fs::remove_dir_all(&root);
    eprintln!("answers through a 4 s database outage: {counts:?}");
    assert!(counts.get(&200).is_some_and(|n| *n > 0), "{counts:?}");
    assert!(
        counts.keys().all(|status| matches!(status, 200 | 503)),
        "answers other than 200 or 503: {counts:?}"
    );
    assert_eq!(unavailable_without_retry, 0, "a 503 without Retry-After");
}
