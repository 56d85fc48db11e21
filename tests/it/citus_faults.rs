//! Faults and operations on a Citus cluster (docs/scaling.md, "Runbook"): each test starts
//! its own coordinator and two workers with `scripts/citus up` (its own `--dir` and ports)
//! and serves the real application over the coordinator, with every shot sent with an
//! `Idempotency-Key` and retried with it on `503 unavailable`, as a client should.
//!
//! - A worker is stopped (immediate mode, a crash) while matches on both workers are
//!   played: the matches of the other worker go on, those of the stopped one are answered
//!   `503 unavailable` (never a 500) and their retries succeed once it is back; every
//!   acknowledged shot is stored exactly once, and no clock is expired by the outage.
//! - Shards are moved (`citus_move_shard_placement`) and the cluster rebalanced
//!   (`citus_rebalance_start`) while matches are played: no acknowledged shot is lost or
//!   duplicated, every match has one result, the event log still refuses `UPDATE` and
//!   `DELETE` on the moved shards.
//! - A third worker is added (`scripts/citus add-worker`) and the cluster rebalanced onto
//!   it while matches are played: shards now sit on the new worker, no acknowledged shot is
//!   lost or duplicated, every match has one result.
//! - The service is given the URL `scripts/citus up` prints for it: the owner
//!   `statki_owner`, which migrates, distributes and plays, and cannot become superuser.
//!
//! `statki verify` passes on the cluster after each. The figures are printed for
//! docs/scaling.md. Where Citus is not installed (and cannot be built from the vendored
//! source), the tests say so and pass without running. Ports: `STATKI_TEST_CITUS_FAULTS_PORT`
//! (default 9910) for the first test's coordinator, workers on the next ports, ten above
//! for the second, twenty above for the third and thirty above for the fourth.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool};
use statki::app::GameSettings;
use statki::engine::Clock;
use tokio::task::JoinHandle;

use crate::common::{self, Player, TestApp};

/// Whether Citus is in the machine's PostgreSQL or can be built from the vendored source
/// (as `scripts/test` decides).
fn citus_available() -> bool {
    let libdirs = Command::new("pg_config")
        .arg("--pkglibdir")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .into_iter()
        .chain(
            std::fs::read_dir("/usr/lib/postgresql")
                .into_iter()
                .flatten()
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.path().join("lib").display().to_string()),
        );
    let installed = libdirs
        .into_iter()
        .any(|dir| Path::new(&dir).join("citus.so").exists());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    installed
        || manifest.join("../shared/vendor/citus/install").exists()
        || Path::new("/work/shared/vendor/citus/install").exists()
}

fn base_port(offset: u16) -> u16 {
    std::env::var("STATKI_TEST_CITUS_FAULTS_PORT")
        .ok()
        .and_then(|port| port.parse().ok())
        .unwrap_or(9910)
        + offset
}

/// A cluster of `scripts/citus`, stopped and removed on drop.
struct Cluster {
    dir: PathBuf,
    port: u16,
    /// The coordinator's URLs as `up` printed them: the superuser's, and the service's
    /// (the owner `statki_owner`).
    url: String,
    service_url: String,
}

impl Cluster {
    fn script(&self, args: &[&str]) -> String {
        common::run_ok(
            common::script("citus")
                .args(args)
                .arg("--dir")
                .arg(&self.dir)
                .env("STATKI_CITUS_FOR_TESTS", "1"),
            &format!("scripts/citus {args:?}"),
        )
    }

    fn up(name: &str, port: u16) -> Cluster {
        let mut cluster = Cluster {
            dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("{name}-{}", std::process::id())),
            port,
            url: String::new(),
            service_url: String::new(),
        };
        let port = port.to_string();
        let printed = cluster.script(&["up", "--workers", "2", "--port", &port]);
        let printed_url = |name: &str| {
            printed
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("scripts/citus up printed no {name}: {printed:?}"))
                .to_owned()
        };
        cluster.url = printed_url("SUPERUSER_URL");
        cluster.service_url = printed_url("DATABASE_URL");
        cluster
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    /// Runs `scripts/citus` off the runtime's threads; what it printed, and when it ended.
    async fn run(&self, args: &'static [&'static str]) -> (String, Instant) {
        let cluster = Cluster {
            dir: self.dir.clone(),
            port: self.port,
            url: self.url.clone(),
            service_url: self.service_url.clone(),
        };
        let done = tokio::task::spawn_blocking(move || {
            let printed = cluster.script(args);
            let done = Instant::now();
            // Not dropped: that would take the cluster down.
            std::mem::forget(cluster);
            (printed, done)
        });
        done.await.unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = common::script("citus")
            .args(["down", "--dir"])
            .arg(&self.dir)
            .output();
    }
}

/// The figures of a run.
#[derive(Default)]
struct Tally {
    acknowledged: AtomicUsize,
    unavailable: AtomicUsize,
    retries: AtomicUsize,
    /// Shots acknowledged while the fault lasted (set by the test).
    during_fault: AtomicUsize,
    fault: AtomicBool,
}

/// One match being played: its id, seats, and the shots acknowledged (player, cell).
struct Played {
    id: String,
    players: [Player; 2],
    acknowledged: BTreeSet<(usize, String)>,
    unavailable: usize,
    acknowledged_during_fault: usize,
}

/// Sends until the answer is not `503 unavailable`; any other 5xx fails the test.
async fn until_available(
    app: &TestApp,
    tally: &Tally,
    played_unavailable: &mut usize,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> common::Reply {
    let started = Instant::now();
    let mut first = true;
    loop {
        if !first {
            tally.retries.fetch_add(1, Ordering::Relaxed);
        }
        first = false;
        let reply = app.send(build()).await;
        if reply.status != StatusCode::SERVICE_UNAVAILABLE {
            assert!(
                !reply.status.is_server_error(),
                "{}: {:?}",
                reply.status,
                reply.body
            );
            return reply;
        }
        assert_eq!(reply.code(), "unavailable", "{:?}", reply.body);
        tally.unavailable.fetch_add(1, Ordering::Relaxed);
        *played_unavailable += 1;
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "still unavailable after two minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Plays a battle to its end: the player on turn shoots the other's fleet cells in order
/// (so a match lasts at most 33 shots), each shot with its own key, retried on 503.
async fn play(
    app: Arc<TestApp>,
    tally: Arc<Tally>,
    id: String,
    players: [Player; 2],
    pause: Duration,
) -> Played {
    let targets = common::legal_fleet_cells("statki");
    let mut next = [0usize, 0usize];
    let mut played = Played {
        id: id.clone(),
        players: players.clone(),
        acknowledged: BTreeSet::new(),
        unavailable: 0,
        acknowledged_during_fault: 0,
    };
    loop {
        let view = until_available(&app, &tally, &mut played.unavailable, || {
            app.client
                .get(app.url(&format!("/v1/matches/{id}")))
                .bearer_auth(&players[0].token)
        })
        .await;
        assert_eq!(view.status, StatusCode::OK, "{:?}", view.body);
        if view.body["phase"] == "finished" {
            return played;
        }
        let seat = usize::from(view.body["turn"] != players[0].id.as_str());
        let cell = targets[next[seat]].clone();
        let reply = until_available(&app, &tally, &mut played.unavailable, || {
            app.client
                .post(app.url(&format!("/v1/matches/{id}/shots")))
                .bearer_auth(&players[seat].token)
                .header("idempotency-key", format!("shot-{seat}-{cell}"))
                .json(&json!({ "cell": cell }))
        })
        .await;
        if reply.code() == "wrong_phase" {
            // Finished otherwise (on time): the log check below says how.
            return played;
        }
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        tally.acknowledged.fetch_add(1, Ordering::Relaxed);
        if tally.fault.load(Ordering::Relaxed) {
            tally.during_fault.fetch_add(1, Ordering::Relaxed);
            played.acknowledged_during_fault += 1;
        }
        assert!(
            played.acknowledged.insert((seat, cell.clone())),
            "{cell} acknowledged twice"
        );
        next[seat] += 1;
        if reply.body["phase"] == "finished" {
            return played;
        }
        tokio::time::sleep(pause).await;
    }
}

/// The worker (1 or 2) holding a match, from Citus's shard placements.
async fn worker_of(pool: &PgPool, cluster: &Cluster, id: &str) -> u16 {
    let port: i32 = sqlx::query_scalar(
        "SELECT nodeport FROM citus_shards
         WHERE table_name = 'matches'::regclass
           AND shardid = get_shard_id_for_distribution_column('matches', $1::uuid)",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .expect("the match's placement");
    (port as u16) - cluster.port
}

/// Checks every match's log against its acknowledged shots; returns (stored, duplicated).
async fn check_logs(pool: &PgPool, played: &[Played]) -> (usize, usize) {
    let mut stored_total = 0;
    let mut duplicated = 0;
    for match_ in played {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT payload->>'player', payload->>'cell' FROM match_events
             WHERE match_id = $1::uuid AND kind = 'shot_fired' ORDER BY seq",
        )
        .bind(&match_.id)
        .fetch_all(pool)
        .await
        .unwrap();
        stored_total += rows.len();
        let stored: BTreeSet<(usize, String)> = rows
            .iter()
            .map(|(player, cell)| (usize::from(*player != match_.players[0].id), cell.clone()))
            .collect();
        duplicated += rows.len() - stored.len();
        assert_eq!(
            stored, match_.acknowledged,
            "match {}: the stored shots are not the acknowledged ones",
            match_.id
        );
        let results: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM match_events WHERE match_id = $1::uuid AND kind = 'match_finished'",
        )
        .bind(&match_.id)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(results, 1, "match {}: {results} results", match_.id);
        let reason: String = sqlx::query_scalar(
            "SELECT payload->>'reason' FROM match_events
             WHERE match_id = $1::uuid AND kind = 'match_finished'",
        )
        .bind(&match_.id)
        .fetch_one(pool)
        .await
        .unwrap();
        let clock: Vec<(String, String)> = sqlx::query_as(
            "SELECT kind || ' ' || to_char(at, 'HH24:MI:SS.MS'), payload::text FROM match_events
             WHERE match_id = $1::uuid ORDER BY seq DESC LIMIT 4",
        )
        .bind(&match_.id)
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(reason, "all_sunk", "match {}: {clock:?}", match_.id);
    }
    assert_eq!(duplicated, 0, "shots stored twice");
    (stored_total, duplicated)
}

async fn pool_for(cluster: &Cluster) -> PgPool {
    PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&cluster.url())
        .await
        .expect("the coordinator")
}

/// Rebalances the cluster (`citus_rebalance_start`, logical replication so writes go on)
/// and waits for the end; how long it took.
async fn rebalance(pool: &PgPool) -> Duration {
    let rebalancing = Instant::now();
    sqlx::query("SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical')")
        .execute(pool)
        .await
        .expect("start the rebalance");
    sqlx::query("SELECT citus_rebalance_wait()")
        .execute(pool)
        .await
        .expect("the rebalance finished");
    rebalancing.elapsed()
}

/// Shards of `matches` per worker port.
async fn placements(pool: &PgPool) -> Vec<(i32, i64)> {
    sqlx::query_as(
        "SELECT nodeport, count(*) FROM citus_shards WHERE table_name = 'matches'::regclass
         GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A test's cluster (two workers) with the application served over its coordinator, and
/// battles on both workers being played, `pause` between one match's shots.
struct Play {
    cluster: Cluster,
    pool: PgPool,
    app: Arc<TestApp>,
    /// Each match: id, seats, the worker it was made on.
    matches: Vec<(String, [Player; 2], u16)>,
    tally: Arc<Tally>,
    games: Vec<JoinHandle<Played>>,
}

impl Play {
    /// `None` where Citus is not available (said, and the test passes without running).
    async fn start(name: &str, port: u16, settings: GameSettings, pause: Duration) -> Option<Play> {
        if !citus_available() {
            eprintln!("skipped: Citus is not installed and its vendored source is not here");
            return None;
        }
        let cluster = Cluster::up(name, port);
        let pool = pool_for(&cluster).await;
        let app = Arc::new(common::spawn_app_with(pool.clone(), settings).await);
        // Battles until each worker holds at least three (match ids are random, so a few
        // more are made when the draw is uneven), each played from the moment it is made:
        // its shot clock runs from then.
        let tally = Arc::new(Tally::default());
        let (mut matches, mut games) = (Vec::new(), Vec::new());
        let mut on = BTreeMap::<u16, usize>::new();
        while on.get(&1).copied().unwrap_or(0) < 3 || on.get(&2).copied().unwrap_or(0) < 3 {
            let (id, first, second) = app.battle_match("statki").await;
            let players = [first, second];
            games.push(tokio::spawn(play(
                app.clone(),
                tally.clone(),
                id.clone(),
                players.clone(),
                pause,
            )));
            let worker = worker_of(&pool, &cluster, &id).await;
            *on.entry(worker).or_default() += 1;
            matches.push((id, players, worker));
            assert!(matches.len() < 40, "match ids keep landing on one worker");
        }
        Some(Play {
            cluster,
            pool,
            app,
            matches,
            tally,
            games,
        })
    }

    /// [`Play::start`] with the standard clocks and 1.2 s between a match's shots, and the
    /// fault (shards moving) marked begun a second later, while the matches are played.
    async fn moving_shards(name: &str, port: u16) -> Option<Play> {
        let pause = Duration::from_millis(1200);
        let run = Play::start(name, port, common::standard_settings(), pause).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        run.tally.fault.store(true, Ordering::Relaxed);
        Some(run)
    }

    /// Every acknowledged shot is among the `stored`, some were acknowledged while
    /// `fault` lasted, and `statki verify` passes.
    async fn no_shot_lost(self, stored: usize, fault: &str) {
        let acknowledged = self.tally.acknowledged.load(Ordering::Relaxed);
        assert_eq!(stored, acknowledged, "acknowledged shots lost");
        assert!(
            self.tally.during_fault.load(Ordering::Relaxed) > 0,
            "no shot was played while {fault}: nothing was tested"
        );
        self.verify().await;
    }

    /// Waits until every match is played to its end.
    async fn played(&mut self) -> Vec<Played> {
        let mut played = Vec::new();
        for game in std::mem::take(&mut self.games) {
            played.push(game.await.expect("a match played to its end"));
        }
        played
    }

    /// Stops the application, then `statki verify` must pass on the cluster.
    async fn verify(self) {
        drop(self.app);
        self.pool.close().await;
        common::verify(&self.cluster.url(), "the Citus cluster");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_worker_answers_503_for_its_matches_only_and_loses_nothing() {
    // A short shot clock, shorter than the outage: a match on the stopped worker would
    // lose on time if the outage were not given back.
    let mut settings = common::standard_settings();
    settings.standard_clock = Clock {
        placement_seconds: 120,
        shot_seconds: 5,
    };
    let pause = Duration::from_millis(300);
    let Some(mut run) = Play::start("citus-worker-stop", base_port(0), settings, pause).await
    else {
        return;
    };
    let (stop_clock, stopped) = tokio::sync::watch::channel(false);
    let clock = tokio::spawn(statki::clock::run(run.app.app.clone(), stopped));
    let (cluster, pool, tally) = (&run.cluster, run.pool.clone(), run.tally.clone());

    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = tally.acknowledged.load(Ordering::Relaxed);
    let (_, stopped_at) = cluster.run(&["stop-worker", "2"]).await;
    tally.fault.store(true, Ordering::Relaxed);
    // Longer than the shot clock.
    tokio::time::sleep(Duration::from_secs(8)).await;
    tally.fault.store(false, Ordering::Relaxed);
    let (_, started_at) = cluster.run(&["start-worker", "2"]).await;
    let outage = started_at - stopped_at;

    let played = run.played().await;
    let _ = stop_clock.send(true);
    clock.await.unwrap();

    let worker: BTreeMap<&str, u16> = run
        .matches
        .iter()
        .map(|(id, _, worker)| (id.as_str(), *worker))
        .collect();
    let on_stopped: Vec<&Played> = played
        .iter()
        .filter(|p| worker[p.id.as_str()] == 2)
        .collect();
    let on_other: Vec<&Played> = played
        .iter()
        .filter(|p| worker[p.id.as_str()] == 1)
        .collect();
    let acknowledged = tally.acknowledged.load(Ordering::Relaxed);
    for p in &played {
        eprintln!(
            "match {} on worker {}: {} acknowledged ({} during the outage), {} answers 503",
            p.id,
            worker[p.id.as_str()],
            p.acknowledged.len(),
            p.acknowledged_during_fault,
            p.unavailable
        );
    }
    let (stored, duplicated) = check_logs(&pool, &played).await;
    let other_during: usize = on_other.iter().map(|p| p.acknowledged_during_fault).sum();
    let stopped_during: usize = on_stopped.iter().map(|p| p.acknowledged_during_fault).sum();
    let stopped_503: usize = on_stopped.iter().map(|p| p.unavailable).sum();
    let other_503: usize = on_other.iter().map(|p| p.unavailable).sum();
    // Clocks running on the stopped worker's matches were given the outage back.
    let extended: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT match_id) FROM match_events
         WHERE kind = 'clock_extended' AND match_id = ANY($1::uuid[])",
    )
    .bind(
        on_stopped
            .iter()
            .map(|p| uuid::Uuid::parse_str(&p.id).unwrap())
            .collect::<Vec<_>>(),
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    eprintln!(
        "citus worker stop: {} matches ({} on the stopped worker), outage {:.1} s (shot clock 5 s); \
         {acknowledged} shots acknowledged ({before} before the stop), {stored} stored \
         (lost {}, duplicated {duplicated}); during the outage {other_during} acknowledged on \
         the other worker's matches, {stopped_during} on the stopped one's; \
         {} answers 503 unavailable ({stopped_503} for the stopped worker's matches, \
         {other_503} for the other's), {} retries, 0 answers 500; \
         {extended} of the stopped worker's matches given the outage back",
        played.len(),
        on_stopped.len(),
        outage.as_secs_f64(),
        acknowledged - stored.min(acknowledged),
        tally.unavailable.load(Ordering::Relaxed),
        tally.retries.load(Ordering::Relaxed),
    );
    assert_eq!(stored, acknowledged, "acknowledged shots lost");
    assert!(
        stopped_503 > 0,
        "no command met the stopped worker: nothing was tested"
    );
    assert_eq!(
        stopped_during, 0,
        "a shot on the stopped worker was acknowledged"
    );
    assert!(
        other_during > 0,
        "the other worker's matches made no progress while one worker was stopped"
    );
    assert!(
        extended > 0,
        "no clock of the stopped worker's matches was given the outage back"
    );
    run.verify().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shards_moved_and_rebalanced_mid_play_lose_no_move() {
    let Some(mut run) = Play::moving_shards("citus-shard-move", base_port(10)).await else {
        return;
    };
    let (cluster, pool, tally) = (&run.cluster, run.pool.clone(), run.tally.clone());
    // Every shard of worker 1 moves to worker 2 (the co-located shards of the other
    // per-match tables move with each), while the matches are played.
    let (first, second) = (cluster.port + 1, cluster.port + 2);
    let shards: Vec<i64> = sqlx::query_scalar(
        "SELECT shardid FROM citus_shards WHERE table_name = 'matches'::regclass AND nodeport = $1
         ORDER BY shardid",
    )
    .bind(i32::from(first))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(!shards.is_empty(), "worker 1 holds no shard");
    let moving = Instant::now();
    for shard in &shards {
        sqlx::query(
            "SELECT citus_move_shard_placement($1, '127.0.0.1', $2, '127.0.0.1', $3,
                                              shard_transfer_mode => 'force_logical')",
        )
        .bind(shard)
        .bind(i32::from(first))
        .bind(i32::from(second))
        .execute(&pool)
        .await
        .unwrap_or_else(|e| panic!("move shard {shard}: {e}"));
    }
    let moved_in = moving.elapsed();
    let after_moves = tally.acknowledged.load(Ordering::Relaxed);
    // Worker 1 is empty: the rebalancer moves half back, in the background.
    let rebalanced_in = rebalance(&pool).await;
    tally.fault.store(false, Ordering::Relaxed);
    let placed = placements(&pool).await;
    assert_eq!(
        placed.len(),
        2,
        "the rebalance left a worker empty: {placed:?}"
    );

    let played = run.played().await;
    let acknowledged = tally.acknowledged.load(Ordering::Relaxed);
    let (stored, duplicated) = check_logs(&pool, &played).await;

    // The moved shards still refuse to rewrite the record of play: the triggers moved with
    // them, on every shard, and an UPDATE or DELETE of a moved match's events fails.
    let moved_match = run
        .matches
        .iter()
        .find(|(_, _, worker)| *worker == 1)
        .map(|(id, _, _)| id.clone())
        .expect("a match that was on worker 1");
    for statement in [
        "UPDATE match_events SET kind = kind WHERE match_id = $1::uuid",
        "DELETE FROM match_events WHERE match_id = $1::uuid",
    ] {
        let refused = sqlx::query(statement)
            .bind(&moved_match)
            .execute(&pool)
            .await;
        assert!(
            refused.is_err(),
            "`{statement}` was allowed on a moved shard"
        );
    }
    let (shard_count, with_trigger): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE success AND result = '1')
         FROM run_command_on_shards('match_events',
             $cmd$SELECT count(*) FROM pg_trigger
                  WHERE tgrelid = '%s'::regclass AND tgname LIKE 'match_events_append_only%%'$cmd$)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        with_trigger, shard_count,
        "a shard lost its append-only trigger"
    );
    eprintln!(
        "citus shard moves: {} matches; {} shards of worker 1 moved to worker 2 in {:.1} s, \
         rebalanced back in {:.1} s (placements {placed:?}); {acknowledged} shots acknowledged \
         ({after_moves} by the end of the moves, {} while shards moved), {stored} stored \
         (lost {}, duplicated {duplicated}); {} answers 503 unavailable, {} retries, 0 answers 500; \
         one result per match; the append-only trigger on all {shard_count} shards",
        played.len(),
        shards.len(),
        moved_in.as_secs_f64(),
        rebalanced_in.as_secs_f64(),
        tally.during_fault.load(Ordering::Relaxed),
        acknowledged - stored.min(acknowledged),
        tally.unavailable.load(Ordering::Relaxed),
        tally.retries.load(Ordering::Relaxed),
    );
    run.no_shot_lost(stored, "shards moved").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_added_and_rebalanced_onto_mid_play_loses_no_move() {
    let Some(mut run) = Play::moving_shards("citus-add-worker", base_port(20)).await else {
        return;
    };
    let (cluster, pool, tally) = (&run.cluster, run.pool.clone(), run.tally.clone());
    let adding = Instant::now();
    let (printed, added_at) = cluster.run(&["add-worker"]).await;
    let added_in = added_at - adding;
    let new_port: u16 = printed
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("scripts/citus add-worker printed no port: {printed:?}"));
    assert_eq!(
        new_port,
        cluster.port + 3,
        "the next port after the last worker"
    );
    let status = cluster.script(&["status"]);
    assert!(
        status.contains(&format!("worker 3 127.0.0.1:{new_port} up")),
        "{status}"
    );
    let on_new = |pool: PgPool| async move {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM citus_shards
             WHERE table_name = 'matches'::regclass AND nodeport = $1",
        )
        .bind(i32::from(new_port))
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert_eq!(
        on_new(pool.clone()).await,
        0,
        "a new worker holds no shard yet"
    );
    let after_add = tally.acknowledged.load(Ordering::Relaxed);
    // The rebalancer moves shards of the two first workers onto the new one, in the
    // background, while the matches are played.
    let rebalanced_in = rebalance(&pool).await;
    tally.fault.store(false, Ordering::Relaxed);
    let moved = on_new(pool.clone()).await;
    let placed = placements(&pool).await;
    assert!(moved > 0, "no shard moved onto the new worker: {placed:?}");
    assert_eq!(placed.len(), 3, "a worker is left empty: {placed:?}");

    let played = run.played().await;
    let acknowledged = tally.acknowledged.load(Ordering::Relaxed);
    let (stored, duplicated) = check_logs(&pool, &played).await;
    let on_new_worker = {
        let mut on = 0;
        for (id, _, _) in &run.matches {
            on += usize::from(worker_of(&pool, &run.cluster, id).await == 3);
        }
        on
    };
    eprintln!(
        "citus add worker: {} matches; worker 3 (port {new_port}) added in {:.1} s \
         ({after_add} shots acknowledged by then), {moved} of {} shards rebalanced onto it in \
         {:.1} s (placements {placed:?}; {on_new_worker} of the matches now on it); \
         {acknowledged} shots acknowledged ({} while the worker was added and shards moved), \
         {stored} stored (lost {}, duplicated {duplicated}); {} answers 503 unavailable, \
         {} retries, 0 answers 500; one result per match",
        played.len(),
        added_in.as_secs_f64(),
        placed.iter().map(|(_, n)| n).sum::<i64>(),
        rebalanced_in.as_secs_f64(),
        tally.during_fault.load(Ordering::Relaxed),
        acknowledged - stored.min(acknowledged),
        tally.unavailable.load(Ordering::Relaxed),
        tally.retries.load(Ordering::Relaxed),
    );
    run.no_shot_lost(stored, "the worker was added and shards moved")
        .await;
}

/// Issue 38, item 4 on `scripts/citus`: the service is given the owner `statki_owner`, no
/// superuser, runs its migrations as it (distributing the tables) and works as
/// `statki_app`; its sessions cannot become superuser. Before, `scripts/citus` printed the
/// superuser's URL for the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_service_connects_to_citus_as_an_owner_that_is_no_superuser() {
    if !citus_available() {
        eprintln!("skipped: Citus is not installed and its vendored source is not here");
        return;
    }
    let cluster = Cluster::up("citus-owner", base_port(30));
    let (role, _) = cluster
        .service_url
        .trim_start_matches("postgres://")
        .split_once(':')
        .expect("a role in the service's URL");
    assert_eq!(role, "statki_owner");
    let port = common::free_port();
    let mut replica = tokio::process::Command::new(env!("CARGO_BIN_EXE_statki"))
        .env("DATABASE_URL", &cluster.service_url)
        .env("STATKI_LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "STATKI_JWT_SECRET",
            format!("{:032x}", uuid::Uuid::new_v4().as_u128()),
        )
        .env("STATKI_DB_POOL", "4")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the statki binary starts");
    // This test's own sessions are named, to be told from the service's.
    let admin = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(
            cluster
                .url()
                .parse::<sqlx::postgres::PgConnectOptions>()
                .unwrap()
                .application_name("statki-tests"),
        )
        .await
        .expect("the coordinator");
    // The test's own client of the replica (its event hub listens) connects as the owner
    // too, so any superuser session is the service's.
    let as_owner = PgPool::connect(&cluster.service_url)
        .await
        .expect("as the owner");
    let app = common::replica_app(port, &as_owner).await;
    // The migrations ran as the owner and distributed the tables.
    let distributed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM citus_tables WHERE citus_table_type = 'distributed'",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(distributed > 0, "no table is distributed");
    let (id, shooter, _) = app.battle_match("classic").await;
    let shot = app
        .post(
            &format!("/v1/matches/{id}/shots"),
            &shooter.token,
            serde_json::json!({ "cell": "A1" }),
        )
        .await;
    assert_eq!(shot.status, StatusCode::OK, "{:?}", shot.body);
    let sessions: Vec<(String, bool)> = sqlx::query_as(
        "SELECT DISTINCT a.usename::text, r.rolsuper FROM pg_stat_activity a
         JOIN pg_roles r ON r.oid = a.usesysid
         WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
           AND a.backend_type = 'client backend' AND a.application_name <> 'statki-tests'
           AND a.application_name NOT LIKE 'citus%'",
    )
    .fetch_all(&admin)
    .await
    .unwrap();
    assert_eq!(
        sessions,
        [("statki_owner".to_owned(), false)],
        "the service's sessions"
    );
    let mut owner = sqlx::PgConnection::connect(&cluster.service_url)
        .await
        .expect("as the owner");
    sqlx::raw_sql("RESET ROLE")
        .execute(&mut owner)
        .await
        .unwrap();
    let superuser: String = sqlx::query_scalar("SELECT current_setting('is_superuser')")
        .fetch_one(&mut owner)
        .await
        .unwrap();
    assert_eq!(superuser, "off");
    for escape in ["SET ROLE postgres", "ALTER ROLE statki_owner SUPERUSER"] {
        assert!(
            sqlx::raw_sql(escape).execute(&mut owner).await.is_err(),
            "{escape}"
        );
    }
    let _ = replica.kill().await;
    drop(app);
    as_owner.close().await;
    admin.close().await;
}
