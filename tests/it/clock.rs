//! Clocks: each expiry outcome, the race at the deadline, replicas sharing the work, outages
//! giving time back, and configurable clocks. The clock step is driven with a given time
//! (`clock::sweep`); only the end-to-end tests wait for real (short) clocks.

use crate::common;

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::str::FromStr;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::{Player, TestApp, legal_fleet, spawn_app, spawn_app_with, unique};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use statki::app::GameSettings;
use statki::clock;
use statki::engine::{
    Cell, Clock, Command, Draw, Event, HouseOptions, Match, MatchRules, Orientation, Placement,
    RuleSetId,
};
use statki::store;
use uuid::Uuid;

fn settings(placement_seconds: u32, shot_seconds: u32, join_seconds: u32) -> GameSettings {
    GameSettings {
        standard_clock: Clock {
            placement_seconds,
            shot_seconds,
        },
        join_seconds,
        open_matches_per_player: 100,
    }
}

fn ms(n: i64) -> chrono::Duration {
    chrono::Duration::milliseconds(n)
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().expect("an RFC 3339 string"))
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

async fn view(app: &TestApp, id: &str, player: &Player) -> Value {
    let reply = app
        .get(&format!("/v1/matches/{id}"), Some(&player.token))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

async fn events(app: &TestApp, id: &str, player: &Player) -> Vec<Value> {
    let reply = app
        .get(
            &format!("/v1/matches/{id}/events?after=0"),
            Some(&player.token),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body.as_array().expect("a list of events").clone()
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|event| event["kind"] == kind).count()
}

async fn sweep(app: &TestApp, now: DateTime<Utc>) -> usize {
    clock::sweep(&app.app, now).await.unwrap()
}

async fn fire(app: &TestApp, id: &str, player: &Player, cell: &str) -> common::Reply {
    app.post(
        &format!("/v1/matches/{id}/shots"),
        &player.token,
        json!({ "cell": cell }),
    )
    .await
}

/// Terminal events per match, straight from the audit log.
async fn terminal_events(pool: &PgPool) -> HashMap<Uuid, i64> {
    let rows: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT m.id, count(e.seq) FROM matches m
         LEFT JOIN match_events e ON e.match_id = m.id
              AND e.kind IN ('match_finished', 'match_cancelled')
         GROUP BY m.id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().collect()
}

// ---------------------------------------------------------------------------------------
// What each clock does when it runs out.

#[sqlx::test]
async fn placement_deadline_with_one_fleet_locked_forfeits_the_other(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, a, b) = app.placement_match("statki").await;
    let locked = app
        .put(
            &format!("/v1/matches/{id}/fleet"),
            &a.token,
            legal_fleet("statki"),
        )
        .await;
    assert_eq!(locked.status, StatusCode::OK, "{:?}", locked.body);
    let before = view(&app, &id, &b).await;
    let due = time(&before["deadline"]);
    let left = before["deadline_ms_left"].as_i64().unwrap();
    assert!(left > 110_000 && left <= 120_000, "{left}");

    assert_eq!(sweep(&app, due - ms(1)).await, 0, "not a moment early");
    assert_eq!(view(&app, &id, &b).await["phase"], "placement");
    assert_eq!(sweep(&app, due).await, 1);

    let after = view(&app, &id, &b).await;
    assert_eq!(after["phase"], "finished");
    assert_eq!(after["result"]["winner"], a.id.as_str());
    assert_eq!(after["result"]["reason"], "placement_timeout");
    assert!(after["deadline"].is_null() && after["deadline_ms_left"].is_null());
    assert_eq!(
        sweep(&app, due + chrono::Duration::hours(1)).await,
        0,
        "enforced once"
    );
    assert_eq!(count(&events(&app, &id, &a).await, "match_finished"), 1);
    let late = app
        .put(
            &format!("/v1/matches/{id}/fleet"),
            &b.token,
            legal_fleet("statki"),
        )
        .await;
    assert_eq!(late.code(), "wrong_phase", "{:?}", late.body);
}

#[sqlx::test]
async fn placement_deadline_with_no_fleet_locked_is_a_recorded_draw(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, a, b) = app.placement_match("classic").await;
    // A ship placed but a fleet not locked counts for nothing.
    let placed = app
        .put(
            &format!("/v1/matches/{id}/ships/0"),
            &a.token,
            json!({ "cell": "A1", "orientation": "horizontal" }),
        )
        .await;
    assert_eq!(placed.status, StatusCode::OK, "{:?}", placed.body);
    let due = time(&view(&app, &id, &a).await["deadline"]);
    assert_eq!(sweep(&app, due).await, 1);

    let after = view(&app, &id, &a).await;
    assert_eq!(after["phase"], "finished");
    assert!(after["result"]["winner"].is_null(), "{after}");
    assert_eq!(after["result"]["reason"], "both_placement_timeout");
    for player in [&a, &b] {
        let profile = app.get(&format!("/v1/players/{}", player.id), None).await;
        assert_eq!(profile.body["draws"], 1, "{:?}", profile.body);
        assert_eq!(profile.body["wins"], 0);
        assert_eq!(profile.body["losses"], 0);
    }
    let log = events(&app, &id, &b).await;
    assert_eq!(count(&log, "match_finished"), 1);
    assert!(log.last().unwrap()["winner"].is_null());
}

#[sqlx::test]
async fn shot_deadline_forfeits_the_player_on_turn(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, on_turn, other) = app.battle_match("statki").await;
    let before = view(&app, &id, &other).await;
    assert_eq!(before["turn"], on_turn.id.as_str());
    let due = time(&before["deadline"]);
    let left = before["deadline_ms_left"].as_i64().unwrap();
    assert!(left > 25_000 && left <= 30_000, "{left}");

    assert_eq!(sweep(&app, due - ms(1)).await, 0);
    assert_eq!(sweep(&app, due).await, 1);
    let after = view(&app, &id, &on_turn).await;
    assert_eq!(after["phase"], "finished");
    assert_eq!(after["result"]["winner"], other.id.as_str());
    assert_eq!(after["result"]["reason"], "shot_timeout");
    let events_before = app.event_count().await;
    let late = fire(&app, &id, &on_turn, "J10").await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{:?}", late.body);
    assert_eq!(late.code(), "wrong_phase");
    assert_eq!(
        app.event_count().await,
        events_before,
        "a refusal stores nothing"
    );
}

#[sqlx::test]
async fn a_shot_rearms_the_clock_and_the_old_deadline_is_not_enforced(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, _second) = app.battle_match("statki").await;
    let old = time(&view(&app, &id, &first).await["deadline"]);
    let shot = fire(&app, &id, &first, "J10").await;
    assert_eq!(shot.status, StatusCode::OK, "{:?}", shot.body);
    let new = time(&shot.body["deadline"]);
    assert!(new > old, "{new} after {old}");

    // The old deadline passes: the match is no longer in the state that armed it.
    assert_eq!(sweep(&app, old + ms(1)).await, 0);
    assert_eq!(view(&app, &id, &first).await["phase"], "battle");
    assert_eq!(sweep(&app, new).await, 1);
    let after = view(&app, &id, &first).await;
    assert_eq!(after["result"]["winner"], first.id.as_str());
    assert_eq!(after["result"]["reason"], "shot_timeout");
}

#[sqlx::test]
async fn an_unjoined_match_is_cancelled_after_the_join_time(pool: PgPool) {
    let app = spawn_app_with(pool, settings(120, 30, 60)).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let id = app.create_match(&a, json!({})).await;
    let created = view(&app, &id, &a).await;
    let due = time(&created["deadline"]);
    assert_eq!(
        due - time(&created["created_at"]),
        chrono::Duration::seconds(60)
    );

    assert_eq!(sweep(&app, due - ms(1)).await, 0);
    assert_eq!(sweep(&app, due).await, 1);
    let after = view(&app, &id, &a).await;
    assert_eq!(after["phase"], "cancelled");
    assert!(after["result"].is_null() && after["deadline"].is_null());
    let log = events(&app, &id, &a).await;
    assert_eq!(count(&log, "match_cancelled"), 1);
    assert_eq!(log.last().unwrap()["reason"], "not_joined");

    let join = app
        .post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
        .await;
    assert_eq!(join.code(), "wrong_phase", "{:?}", join.body);
    let open = app.get("/v1/matches?status=open", Some(&b.token)).await;
    assert!(
        !open.body["matches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == id.as_str()),
        "{:?}",
        open.body
    );
}

#[test]
fn the_default_configuration_is_the_design_card() {
    use clap::Parser;
    let config = statki::config::Config::try_parse_from(["statki"]).unwrap();
    assert_eq!(config.placement_seconds, 120);
    assert_eq!(config.shot_seconds, 30);
    assert_eq!(config.join_seconds, 15 * 60);
}

// ---------------------------------------------------------------------------------------
// Standard and custom clocks, through HTTP.

#[sqlx::test]
async fn custom_clocks_are_for_unranked_matches_within_bounds(pool: PgPool) {
    let app = spawn_app_with(pool, settings(77, 11, 900)).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;

    for (placement, shot) in [(4, 30), (601, 30), (120, 1), (120, 121), (0, 0)] {
        let clock = json!({ "placement_seconds": placement, "shot_seconds": shot });
        let reply = app
            .post("/v1/matches", &a.token, json!({ "clock": clock }))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{clock}: {:?}",
            reply.body
        );
        assert_eq!(reply.code(), "invalid_option", "{clock}");
    }
    let ranked = app
        .post(
            "/v1/matches",
            &a.token,
            json!({ "ranked": true, "clock": { "placement_seconds": 120, "shot_seconds": 30 } }),
        )
        .await;
    assert_eq!(
        ranked.code(),
        "ranked_needs_standard_rules",
        "{:?}",
        ranked.body
    );

    // The bounds themselves are allowed; the match runs on its own clock.
    for (placement, shot) in [(5, 2), (600, 120)] {
        let clock = json!({ "placement_seconds": placement, "shot_seconds": shot });
        let id = app.create_match(&a, json!({ "clock": clock })).await;
        let joined = app
            .post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
            .await;
        assert_eq!(joined.status, StatusCode::OK, "{:?}", joined.body);
        let placing = view(&app, &id, &a).await;
        assert_eq!(placing["rules"]["clock"], clock);
        let left = placing["deadline_ms_left"].as_i64().unwrap();
        assert!(
            left <= placement * 1000 && left > placement * 1000 - 3000,
            "{left}"
        );
        for player in [&a, &b] {
            let reply = app
                .put(
                    &format!("/v1/matches/{id}/fleet"),
                    &player.token,
                    legal_fleet("statki"),
                )
                .await;
            assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        }
        let left = view(&app, &id, &a).await["deadline_ms_left"]
            .as_i64()
            .unwrap();
        assert!(left <= shot * 1000 && left > shot * 1000 - 3000, "{left}");
    }

    // Ranked matches, and unranked ones that ask for nothing, use the operator's clock.
    for body in [json!({ "ranked": true }), json!({})] {
        let id = app.create_match(&a, body).await;
        let joined = app
            .post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
            .await;
        assert_eq!(joined.status, StatusCode::OK, "{:?}", joined.body);
        let placing = view(&app, &id, &b).await;
        assert_eq!(
            placing["rules"]["clock"],
            json!({ "placement_seconds": 77, "shot_seconds": 11 })
        );
        let left = placing["deadline_ms_left"].as_i64().unwrap();
        assert!(left <= 77_000 && left > 74_000, "{left}");
    }
}

// ---------------------------------------------------------------------------------------
// Matches built by the engine and stored as the service stores them, with chosen deadlines,
// so many clocks can run out at one instant.

fn fleet() -> Vec<Placement> {
    ["A1", "A3", "A5", "A7", "A9"]
        .iter()
        .map(|bow| Placement {
            cell: Cell::from_str(bow).unwrap(),
            orientation: Orientation::Horizontal,
        })
        .collect()
}

/// A battle between `a` (on turn) and `b` whose shot clock runs out at `deadline`.
fn battle(a: Uuid, b: Uuid, deadline: DateTime<Utc>) -> (Match, Vec<Event>) {
    let clock = Clock {
        placement_seconds: 120,
        shot_seconds: 30,
    };
    let rules = MatchRules::new(RuleSetId::Statki, HouseOptions::default(), clock, 900).unwrap();
    let start = deadline - chrono::Duration::seconds(30);
    let created = Match::create(a, rules, false, None, start).unwrap();
    let mut state = Match::fold([&created]).unwrap();
    let mut log = vec![created];
    let draw = Draw {
        coin: false,
        salt: [1; 16],
    };
    log.extend(state.execute(b, &Command::Join, start, draw).unwrap());
    for player in [a, b] {
        let placements = fleet();
        log.extend(
            state
                .execute(player, &Command::PlaceFleet { placements }, start, draw)
                .unwrap(),
        );
    }
    assert_eq!(state.player(0), Some(a));
    assert_eq!(
        state.turn,
        Some(0),
        "the coin gives the creator the first shot"
    );
    (state, log)
}

/// Stores battles between the given pairs with the given deadlines; returns their ids.
async fn store_battles(pool: &PgPool, games: &[(Uuid, Uuid, DateTime<Utc>)]) -> Vec<Uuid> {
    let mut tx = pool.begin().await.unwrap();
    let ids = store_battles_in(&mut tx, games).await;
    tx.commit().await.unwrap();
    ids
}

/// [`store_battles`] in the caller's transaction.
async fn store_battles_in(
    conn: &mut sqlx::PgConnection,
    games: &[(Uuid, Uuid, DateTime<Utc>)],
) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for &(a, b, deadline) in games {
        let (state, log) = battle(a, b, deadline);
        let id = Uuid::now_v7();
        let at = deadline - chrono::Duration::seconds(30);
        store::matches::insert(&mut *conn, id, &state, log.len() as i64, at)
            .await
            .unwrap();
        store::events::append(&mut *conn, id, 0, at, &log)
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

async fn store_players(pool: &PgPool, n: usize) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = Uuid::now_v7();
        store::players::insert(
            pool,
            id,
            &statki::names::PlayerName::parse(&unique("p")).unwrap(),
        )
        .await
        .unwrap();
        ids.push(id);
    }
    ids
}

async fn sleep_until(deadline: DateTime<Utc>) {
    if let Ok(wait) = (deadline - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

#[sqlx::test]
async fn a_locked_match_is_skipped_and_a_rearmed_one_is_not_expired(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (id, first, _second) = app.battle_match("statki").await;
    let due = time(&view(&app, &id, &first).await["deadline"]);

    // A command in flight holds the row: the sweep passes it by instead of waiting.
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM matches WHERE id = $1::uuid FOR UPDATE")
        .bind(&id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let skipped = tokio::time::timeout(Duration::from_secs(2), sweep(&app, due + ms(5)))
        .await
        .expect("the sweep waited for the row");
    assert_eq!(skipped, 0);
    holder.rollback().await.unwrap();

    // That command turns out to be a shot: the clock it raced is no longer armed.
    let shot = fire(&app, &id, &first, "J10").await;
    assert_eq!(shot.status, StatusCode::OK, "{:?}", shot.body);
    assert_eq!(sweep(&app, due + ms(5)).await, 0);
    assert_eq!(view(&app, &id, &first).await["phase"], "battle");
}

#[sqlx::test]
async fn an_unreadable_match_does_not_stop_the_other_clocks(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (broken, first, _) = app.battle_match("statki").await;
    let (healthy, other, _) = app.battle_match("statki").await;
    let due = time(&view(&app, &healthy, &other).await["deadline"]);
    assert!(time(&view(&app, &broken, &first).await["deadline"]) <= due);
    sqlx::query("UPDATE matches SET snapshot = '{\"broken\": true}' WHERE id = $1::uuid")
        .bind(&broken)
        .execute(&pool)
        .await
        .unwrap();

    // The unreadable match comes first in deadline order, and is passed over.
    assert_eq!(sweep(&app, due).await, 1);
    assert_eq!(view(&app, &healthy, &other).await["phase"], "finished");
    let still_due: i64 = sqlx::query_scalar("SELECT count(*) FROM matches WHERE deadline <= $1")
        .bind(due)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(still_due, 1, "left for an operator, not silently dropped");
}

#[sqlx::test]
async fn shots_racing_the_deadline_have_exactly_one_outcome(
    options: PgPoolOptions,
    connect: PgConnectOptions,
) {
    const MATCHES: usize = 40;
    let pool = options
        .max_connections(10)
        .connect_with(connect)
        .await
        .unwrap();
    let app = spawn_app(pool.clone()).await;
    let mut pairs = Vec::new();
    for _ in 0..4 {
        pairs.push((
            app.register(&unique("ala")).await,
            app.register(&unique("bolek")).await,
        ));
    }
    let deadline = db_now(&pool).await + ms(1500);
    let games: Vec<_> = (0..MATCHES)
        .map(|i| {
            let (a, b) = &pairs[i % pairs.len()];
            (a.id.parse().unwrap(), b.id.parse().unwrap(), deadline)
        })
        .collect();
    let ids = store_battles(&pool, &games).await;

    // Shots land from 40 ms before to 160 ms after the deadline while two sweepers run: the
    // ones around the deadline race the clock; the late ones must lose to it, however
    // loaded the machine.
    let app = std::sync::Arc::new(app);
    let mut shots = tokio::task::JoinSet::new();
    for (i, id) in ids.iter().enumerate() {
        let (app, id) = (app.clone(), id.to_string());
        let shooter = pairs[i % pairs.len()].0.clone();
        let at = deadline + ms(i as i64 * 200 / MATCHES as i64 - 40);
        shots.spawn(async move {
            sleep_until(at).await;
            let reply = fire(&app, &id, &shooter, "J10").await;
            (id, reply)
        });
    }
    let mut sweepers = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let (app, pool) = (app.clone(), pool.clone());
        sweepers.spawn(async move {
            sleep_until(deadline - ms(50)).await;
            let mut expired = 0;
            while Utc::now() < deadline + ms(600) {
                expired += clock::sweep(&app.app, db_now(&pool).await).await.unwrap();
            }
            expired
        });
    }
    let mut replies = HashMap::new();
    while let Some(done) = shots.join_next().await {
        let (id, reply) = done.unwrap();
        replies.insert(id, reply);
    }
    let mut expired_in_race = 0;
    while let Some(done) = sweepers.join_next().await {
        expired_in_race += done.unwrap();
    }
    // Whatever the race left running runs out later. A late shot may itself enforce the
    // clock it missed, so the sweeps account for at most every match.
    let later = sweep(&app, deadline + chrono::Duration::hours(1)).await;
    assert!(expired_in_race + later <= MATCHES);

    let (mut shot_first, mut clock_first) = (0, 0);
    for (i, id) in ids.iter().enumerate() {
        let (shooter, target) = &pairs[i % pairs.len()];
        let id = id.to_string();
        let log = events(&app, &id, shooter).await;
        let finished: Vec<usize> = (0..log.len())
            .filter(|&n| log[n]["kind"] == "match_finished")
            .collect();
        assert_eq!(finished.len(), 1, "{id}: {log:?}");
        assert_eq!(
            finished[0],
            log.len() - 1,
            "nothing after the result: {log:?}"
        );
        let reply = &replies[&id];
        let fired_after_deadline = i as i64 * 200 / MATCHES as i64 - 40 > 0;
        assert!(
            !(fired_after_deadline && reply.status == StatusCode::OK),
            "a shot fired after the deadline was accepted: {log:?}"
        );
        let result = &log[finished[0]];
        assert_eq!(result["reason"], "shot_timeout");
        if reply.status == StatusCode::OK {
            // The shot got in first: the turn passed, and later the target's clock ran out.
            shot_first += 1;
            assert_eq!(count(&log, "shot_fired"), 1, "{log:?}");
            assert_eq!(result["winner"], shooter.id.as_str());
        } else {
            clock_first += 1;
            assert_eq!(reply.code(), "wrong_phase", "{:?}", reply.body);
            assert_eq!(count(&log, "shot_fired"), 0, "{log:?}");
            assert_eq!(result["winner"], target.id.as_str());
        }
    }
    eprintln!("race: {shot_first} shots first, {clock_first} clocks first");
    assert!(clock_first > 0, "no clock ran out during the race");
    assert!(
        terminal_events(&pool).await.values().all(|n| *n == 1),
        "every match has exactly one terminal event"
    );
}

// ---------------------------------------------------------------------------------------
// Outages: nobody loses to time the service was down.

/// A heartbeat from a replica that is no longer running.
async fn beat(pool: &PgPool, at: DateTime<Utc>) {
    store::replicas::beat_at(pool, Uuid::now_v7(), at)
        .await
        .unwrap();
}

#[sqlx::test]
async fn after_an_outage_every_clock_gets_its_time_back(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    // A battle on a 2 s clock that runs out while a replica is still alive, and one on the
    // standard 30 s clock that runs out during the outage.
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let short = app
        .create_match(
            &a,
            json!({ "clock": { "placement_seconds": 120, "shot_seconds": 2 } }),
        )
        .await;
    let joined = app
        .post(&format!("/v1/matches/{short}/join"), &b.token, json!({}))
        .await;
    assert_eq!(joined.status, StatusCode::OK, "{:?}", joined.body);
    for player in [&a, &b] {
        let locked = app
            .put(
                &format!("/v1/matches/{short}/fleet"),
                &player.token,
                legal_fleet("statki"),
            )
            .await;
        assert_eq!(locked.status, StatusCode::OK, "{:?}", locked.body);
    }
    let (long, on_turn, other) = app.battle_match("statki").await;
    let waiting = app.create_match(&a, json!({})).await;
    let short_due = time(&view(&app, &short, &a).await["deadline"]);
    let long_due = time(&view(&app, &long, &other).await["deadline"]);
    let waiting_due = time(&view(&app, &waiting, &a).await["deadline"]);

    // The last replica dies 1 s after the short clock ran out; the next starts 100 s later.
    let last = short_due + chrono::Duration::seconds(1);
    assert!(last < long_due);
    beat(&pool, last).await;
    let back = last + chrono::Duration::seconds(100);
    let replica = Uuid::now_v7();
    let extended = clock::recover_outage_at(&app.app, replica, back)
        .await
        .unwrap();
    assert_eq!(
        extended, 2,
        "the battle and the open match get their time back"
    );

    // The short clock ran out while a replica was alive: enforced now, not forgiven.
    assert_eq!(sweep(&app, back).await, 1);
    assert_eq!(
        view(&app, &short, &a).await["result"]["reason"],
        "shot_timeout"
    );
    let resumed = view(&app, &long, &other).await;
    assert_eq!(resumed["phase"], "battle", "nobody lost to the outage");
    assert_eq!(resumed["turn"], on_turn.id.as_str());
    let extended_due = time(&resumed["deadline"]);
    assert_eq!(
        extended_due - back,
        long_due - last,
        "the time left is given back"
    );
    assert_eq!(
        time(&view(&app, &waiting, &a).await["deadline"]) - waiting_due,
        back - last
    );
    let log = events(&app, &long, &other).await;
    let extension = log
        .iter()
        .find(|event| event["kind"] == "clock_extended")
        .expect("a clock_extended event");
    assert_eq!(extension["milliseconds"], 100_000);

    // The clock then runs on normally from where it stood.
    assert_eq!(sweep(&app, extended_due - ms(1)).await, 0);
    assert_eq!(sweep(&app, extended_due).await, 1);
    let after = view(&app, &long, &other).await;
    assert_eq!(after["result"]["winner"], other.id.as_str());
    assert_eq!(after["result"]["reason"], "shot_timeout");
    assert_eq!(after["turn"], Value::Null);
}

#[sqlx::test]
async fn a_short_gap_or_a_first_start_gives_nothing_back(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (id, first, _) = app.battle_match("statki").await;
    let due = time(&view(&app, &id, &first).await["deadline"]);
    let now = db_now(&pool).await;
    // No heartbeat at all: a brand-new installation.
    assert_eq!(
        clock::recover_outage_at(&app.app, Uuid::now_v7(), now)
            .await
            .unwrap(),
        0
    );
    // A replica alive a moment ago.
    beat(&pool, now + ms(500)).await;
    assert_eq!(
        clock::recover_outage_at(&app.app, Uuid::now_v7(), now + ms(1500))
            .await
            .unwrap(),
        0
    );
    assert_eq!(time(&view(&app, &id, &first).await["deadline"]), due);
}

#[sqlx::test]
async fn replicas_starting_together_give_the_outage_back_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (id, first, _) = app.battle_match("statki").await;
    let due = time(&view(&app, &id, &first).await["deadline"]);
    beat(&pool, db_now(&pool).await - chrono::Duration::seconds(60)).await;

    let starts = (0..3).map(|_| clock::recover_outage(&app.app, Uuid::now_v7()));
    let extended: usize = futures::future::join_all(starts)
        .await
        .into_iter()
        .map(Result::unwrap)
        .sum();
    assert_eq!(extended, 1);
    let log = events(&app, &id, &first).await;
    assert_eq!(count(&log, "clock_extended"), 1, "{log:?}");
    let gap = log.last().unwrap()["milliseconds"].as_i64().unwrap();
    assert!((60_000..65_000).contains(&gap), "{gap}");
    assert_eq!(
        time(&view(&app, &id, &first).await["deadline"]),
        due + ms(gap)
    );
}

// ---------------------------------------------------------------------------------------
// End to end: the real clock task, real (short) clocks.

async fn wait_for_phase(app: &TestApp, id: &str, player: &Player, within: Duration) -> Value {
    let started = Instant::now();
    loop {
        let current = view(app, id, player).await;
        if current["phase"] == "finished" || current["phase"] == "cancelled" {
            return current;
        }
        assert!(
            started.elapsed() < within,
            "still {} after {within:?}",
            current["phase"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[sqlx::test]
async fn the_clock_task_forfeits_through_http(pool: PgPool) {
    let app = spawn_app_with(pool, settings(3, 2, 900)).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(clock::run(app.app.clone(), stopped));

    let (battle, on_turn, other) = app.battle_match("statki").await;
    let (placing, locker, idler) = app.placement_match("statki").await;
    let locked = app
        .put(
            &format!("/v1/matches/{placing}/fleet"),
            &locker.token,
            legal_fleet("statki"),
        )
        .await;
    assert_eq!(locked.status, StatusCode::OK, "{:?}", locked.body);
    let battle_due = time(&view(&app, &battle, &other).await["deadline"]);
    let placing_due = time(&view(&app, &placing, &idler).await["deadline"]);

    let result = wait_for_phase(&app, &battle, &other, Duration::from_secs(6)).await;
    assert_eq!(result["result"]["winner"], other.id.as_str());
    assert_eq!(result["result"]["reason"], "shot_timeout");
    let finished_at = time(&events(&app, &battle, &other).await.last().unwrap()["at"]);
    assert!(
        finished_at >= battle_due,
        "{finished_at} before {battle_due}"
    );
    assert!(
        finished_at - battle_due < ms(1000),
        "late: {finished_at} vs {battle_due}"
    );
    let late = fire(&app, &battle, &on_turn, "J10").await;
    assert_eq!(late.code(), "wrong_phase");

    let result = wait_for_phase(&app, &placing, &idler, Duration::from_secs(6)).await;
    assert_eq!(result["result"]["winner"], locker.id.as_str());
    assert_eq!(result["result"]["reason"], "placement_timeout");
    let finished_at = time(&events(&app, &placing, &idler).await.last().unwrap()["at"]);
    assert!(finished_at >= placing_due && finished_at - placing_due < ms(1000));

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(3), task)
        .await
        .expect("the clock task stops when told")
        .unwrap();
}

#[sqlx::test]
async fn a_database_stall_is_an_outage_too(pool: PgPool) {
    let app = spawn_app_with(pool.clone(), settings(120, 2, 900)).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(clock::run(app.app.clone(), stopped));
    // Let the replica record itself alive.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (id, _on_turn, other) = app.battle_match("statki").await;
    let due = time(&view(&app, &id, &other).await["deadline"]);

    // Nothing can be recorded for 3 s, longer than the shot clock: the clock task stalls
    // exactly as it would with the database unreachable.
    let mut stall = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE replicas IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *stall)
        .await
        .unwrap();
    sleep_until(due + ms(1500)).await;
    stall.commit().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let resumed = view(&app, &id, &other).await;
    assert_eq!(resumed["phase"], "battle", "nobody lost to the stall");
    let log = events(&app, &id, &other).await;
    assert_eq!(count(&log, "clock_extended"), 1, "{log:?}");
    let result = wait_for_phase(&app, &id, &other, Duration::from_secs(4)).await;
    assert_eq!(result["result"]["reason"], "shot_timeout");
    stop.send(true).unwrap();
    task.await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Real processes: several replicas on one database, one killed; a full restart.

/// The test's own database on the server `DATABASE_URL` names, for child processes.
fn database_url(connect: &PgConnectOptions) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let (path, query) = match base.split_once('?') {
        Some((path, query)) => (path, format!("?{query}")),
        None => (base.as_str(), String::new()),
    };
    let (server, _) = path.rsplit_once('/').expect("a URL with a database");
    let database = connect.get_database().expect("a test database");
    format!("{server}/{database}{query}")
}

fn start_replica(database_url: &str, listen: &str, env: &[(&str, &str)]) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_statki"));
    command
        .env("DATABASE_URL", database_url)
        .env("STATKI_LISTEN", listen)
        .env("STATKI_DB_POOL", "4")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().expect("the statki binary starts")
}

async fn live_replicas(pool: &PgPool, since: DateTime<Utc>) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM replicas WHERE last_seen > $1")
        .bind(since)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn unfinished(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM matches WHERE deadline IS NOT NULL")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn three_replicas_one_killed_finish_every_match_once(
    options: PgPoolOptions,
    connect: PgConnectOptions,
) {
    const MATCHES: usize = 300;
    let pool = options
        .max_connections(3)
        .connect_with(connect.clone())
        .await
        .unwrap();
    store::migrate(&pool).await.unwrap();
    let url = database_url(&connect);
    let started = db_now(&pool).await;
    let mut replicas: Vec<_> = (0..3)
        .map(|_| start_replica(&url, "127.0.0.1:0", &[]))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while live_replicas(&pool, started).await < 3 {
        assert!(Instant::now() < deadline, "replicas did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Clocks run out evenly over 1.5 s, after a lead the setup must fit in: on a loaded
    // machine storing the matches takes seconds, and on Citus, where each statement waits on
    // a worker, over ten (about 16 s for the 300 on 2 loaded cores). So the lead is
    // measured: matches are stored in a transaction rolled back (the first ten open the
    // connections Citus needs, and are not timed), and the clocks start after twice the
    // time all of them take at the pace of the next thirty, at least 4 s.
    let players = store_players(&pool, 20).await;
    let pairs = |i: usize| (players[i % 10], players[10 + i % 10]);
    let sample: Vec<_> = (0..40)
        .map(|i| {
            let (a, b) = pairs(i);
            (a, b, chrono::Utc::now() + ms(600_000))
        })
        .collect();
    let mut trial = pool.begin().await.unwrap();
    store_battles_in(&mut trial, &sample[..10]).await;
    let timed = Instant::now();
    store_battles_in(&mut trial, &sample[10..]).await;
    let pace = timed.elapsed() / 30;
    trial.rollback().await.unwrap();
    let lead = (pace * 2 * MATCHES as u32 + Duration::from_secs(1)).max(Duration::from_secs(4));
    let first = db_now(&pool).await + chrono::Duration::from_std(lead).unwrap();
    let games: Vec<_> = (0..MATCHES)
        .map(|i| {
            let (a, b) = pairs(i);
            let at = first + ms(i as i64 * 1500 / MATCHES as i64);
            (a, b, at)
        })
        .collect();
    let ids = store_battles(&pool, &games).await;
    assert!(
        db_now(&pool).await < first,
        "setup overran the first deadline"
    );

    // Mid-way: half the clocks have run out, and at least one match was finished (on Citus,
    // where each expiry waits on a worker, few are by then).
    sleep_until(first + ms(750)).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while unfinished(&pool).await == MATCHES as i64 {
        assert!(Instant::now() < deadline, "no clock was enforced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let victim = &mut replicas[0];
    victim.start_kill().unwrap();
    let status = victim.wait().await.unwrap();
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL");
    let left_at_kill = unfinished(&pool).await;

    let deadline = Instant::now() + Duration::from_secs(15);
    while unfinished(&pool).await > 0 {
        assert!(Instant::now() < deadline, "matches left unfinished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "replicas: {left_at_kill} of {MATCHES} matches still running at the kill (lead {lead:?})"
    );
    assert!(
        left_at_kill > 0 && left_at_kill < MATCHES as i64,
        "the kill was not mid-way: {left_at_kill} left"
    );
    let terminal = terminal_events(&pool).await;
    assert_eq!(terminal.len(), MATCHES);
    for id in &ids {
        assert_eq!(terminal[id], 1, "{id} finished {} times", terminal[id]);
    }
    let reasons: Vec<(String, i64)> = sqlx::query_as(
        "SELECT payload->>'reason', count(*) FROM match_events
         WHERE kind = 'match_finished' GROUP BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(reasons, vec![("shot_timeout".to_owned(), MATCHES as i64)]);
    let early: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM match_events e JOIN matches m ON m.id = e.match_id
         WHERE e.kind = 'match_finished'
           AND e.at < (SELECT (p.payload->>'deadline')::timestamptz FROM match_events p
                       WHERE p.match_id = e.match_id AND p.kind = 'battle_started')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(early, 0, "no clock enforced before it ran out");
    for replica in &mut replicas[1..] {
        replica.start_kill().unwrap();
        replica.wait().await.unwrap();
    }
}

#[sqlx::test]
async fn a_full_restart_gives_the_player_on_turn_their_time_back(
    options: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = options
        .max_connections(2)
        .connect_with(connect.clone())
        .await
        .unwrap();
    let url = database_url(&connect);
    let env = [
        ("STATKI_SHOT_SECONDS", "4"),
        ("STATKI_PLACEMENT_SECONDS", "9"),
    ];
    let port = common::free_port();
    let mut only = start_replica(&url, &format!("127.0.0.1:{port}"), &env);
    let app = common::replica_app(port, &pool).await;

    // The operator's clocks come from the environment.
    let (id, on_turn, other) = app.battle_match("statki").await;
    let battle = view(&app, &id, &on_turn).await;
    assert_eq!(
        battle["rules"]["clock"],
        json!({ "placement_seconds": 9, "shot_seconds": 4 })
    );
    let due = time(&battle["deadline"]);

    // Everything dies 1.2 s into the shot clock, and stays down past the deadline.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    only.start_kill().unwrap();
    only.wait().await.unwrap();
    let killed = db_now(&pool).await;
    sleep_until(due + ms(2000)).await;

    let port = common::free_port();
    let _restarted = start_replica(&url, &format!("127.0.0.1:{port}"), &env);
    let app = common::replica_app(port, &pool).await;
    let started = Instant::now();
    while count(&events(&app, &id, &other).await, "clock_extended") == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no clock extended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resumed = view(&app, &id, &other).await;
    assert_eq!(resumed["phase"], "battle", "nobody forfeited: {resumed}");
    assert_eq!(resumed["turn"], on_turn.id.as_str());
    // They had 2.8 s left when the last heartbeat before the kill was recorded (at most a
    // second before it); that is what they have again.
    let left = resumed["deadline_ms_left"].as_i64().unwrap();
    let at_kill = (due - killed).num_milliseconds();
    assert!(
        left > at_kill - 1000 && left <= at_kill + 1100,
        "{left} ms left; {at_kill} ms were left at the kill"
    );

    let result = wait_for_phase(&app, &id, &other, Duration::from_secs(6)).await;
    assert_eq!(result["result"]["winner"], other.id.as_str());
    assert_eq!(result["result"]["reason"], "shot_timeout");
}
