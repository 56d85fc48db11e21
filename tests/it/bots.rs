//! Bots over HTTP: listed, challenged like any player in every preset, played to the end,
//! refused for ranked play, rematched, and carried on by a new app instance on the same
//! database. The worker is driven step by step with `Worker::tick`.

use crate::common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use statki::bot::worker::Worker;

const KADET: &str = "00000000-0000-4000-8000-00000000b001";
const BOSMAN: &str = "00000000-0000-4000-8000-00000000b002";
const ADMIRAL: &str = "00000000-0000-4000-8000-00000000b003";

fn worker(app: &TestApp, delay_ms: u64) -> Worker {
    Worker::new(app.app.clone(), Duration::from_millis(delay_ms))
}

async fn db_now(app: &TestApp) -> DateTime<Utc> {
    statki::store::now(&app.pool).await.expect("now")
}

/// Ticks at the database's time until the bot has nothing more to do.
async fn settle(app: &TestApp, worker: &Worker) -> usize {
    let mut moves = 0;
    loop {
        let tick = worker.tick(db_now(app).await).await.expect("tick");
        moves += tick.moves + tick.rematches;
        if tick.moves + tick.rematches == 0 {
            return moves;
        }
    }
}

async fn view(app: &TestApp, id: &str, player: &Player) -> Value {
    let reply = app
        .get(&format!("/v1/matches/{id}"), Some(&player.token))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

/// The human's next shot: the first cell in board order not yet shot or marked.
fn next_cell(view: &Value) -> String {
    let known: Vec<&str> = view["shots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|shot| shot["cell"].as_str())
        .chain(
            view["marked"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        )
        .collect();
    (1..=10)
        .flat_map(|row| ('A'..='J').map(move |col| format!("{col}{row}")))
        .find(|cell| !known.contains(&cell.as_str()))
        .expect("a cell left")
}

/// Challenges `bot` and waits for it to join and place; returns the match id.
async fn challenge(
    app: &TestApp,
    worker: &Worker,
    human: &Player,
    bot: &str,
    body: Value,
) -> String {
    let mut body = body;
    body["opponent"] = json!(bot);
    let id = app.create_match(human, body).await;
    settle(app, worker).await;
    let seen = view(app, &id, human).await;
    assert_eq!(seen["phase"], "placement", "{seen}");
    assert_eq!(seen["opponent_fleet_locked"], true, "{seen}");
    let ruleset = seen["ruleset"].as_str().expect("ruleset").to_owned();
    let placed = app
        .put(
            &format!("/v1/matches/{id}/fleet"),
            &human.token,
            legal_fleet(&ruleset),
        )
        .await;
    assert_eq!(placed.status, StatusCode::OK, "{:?}", placed.body);
    id
}

/// Plays `turns` human shots (or to the end when `None`), letting the bot answer each.
async fn play(
    app: &TestApp,
    worker: &Worker,
    id: &str,
    human: &Player,
    turns: Option<usize>,
) -> Value {
    for fired in 0..1_000 {
        settle(app, worker).await;
        let seen = view(app, id, human).await;
        if seen["phase"] != "battle" || turns.is_some_and(|turns| fired >= turns) {
            return seen;
        }
        assert_eq!(
            seen["turn"],
            json!(human.id),
            "the bot left its turn unplayed: {seen}"
        );
        let shot = app
            .post(
                &format!("/v1/matches/{id}/shots"),
                &human.token,
                json!({ "cell": next_cell(&seen) }),
            )
            .await;
        assert_eq!(shot.status, StatusCode::OK, "{:?}", shot.body);
    }
    panic!("the match did not end");
}

/// The bot's shots in the finished match's public record, each cell once.
fn assert_bot_shots_distinct(seen: &Value, bot: &str) {
    let sides = seen["sides"].as_array().expect("sides");
    let side = sides
        .iter()
        .find(|side| side["player"] == json!(bot))
        .expect("the bot's side");
    let cells: Vec<&str> = side["shots"]
        .as_array()
        .expect("shots")
        .iter()
        .filter_map(|shot| shot["cell"].as_str())
        .collect();
    let mut distinct = cells.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), cells.len(), "a bot fired twice at one cell");
    assert!(!cells.is_empty());
}

#[sqlx::test]
async fn the_three_bots_are_listed(pool: PgPool) {
    let app = spawn_app(pool).await;
    let reply = app.get("/v1/bots", None).await;
    assert_eq!(reply.status, StatusCode::OK);
    let bots = reply.body.as_array().expect("a list");
    let pairs: Vec<(&str, &str)> = bots
        .iter()
        .map(|bot| {
            (
                bot["id"].as_str().unwrap_or(""),
                bot["level"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [(KADET, "easy"), (BOSMAN, "medium"), (ADMIRAL, "hard")]
    );
    for bot in bots {
        assert!(!bot["name"].as_str().unwrap_or("").is_empty());
        assert!(!bot["description"].as_str().unwrap_or("").is_empty());
        let profile = app
            .get(
                &format!("/v1/players/{}", bot["id"].as_str().unwrap_or("")),
                None,
            )
            .await;
        assert_eq!(profile.status, StatusCode::OK);
    }
}

#[sqlx::test]
async fn a_bot_plays_every_preset_to_the_end(pool: PgPool) {
    let app = spawn_app(pool).await;
    let worker = worker(&app, 0);
    let human = app.register(&unique("kapitan")).await;
    let lobbies = [
        (ADMIRAL, json!({ "ruleset": "statki" })),
        (
            BOSMAN,
            json!({ "ruleset": "classic", "clock": { "placement_seconds": 60, "shot_seconds": 10 } }),
        ),
        (
            KADET,
            json!({ "ruleset": "battaglia", "options": { "extra_shot_on_hit": true } }),
        ),
    ];
    for (bot, body) in lobbies {
        let id = challenge(&app, &worker, &human, bot, body).await;
        let seen = play(&app, &worker, &id, &human, None).await;
        assert_eq!(seen["phase"], "finished", "{seen}");
        assert_eq!(seen["result"]["reason"], "all_sunk", "{seen}");
        assert_bot_shots_distinct(&seen, bot);
    }
}

#[sqlx::test]
async fn ranked_against_a_bot_is_refused_and_changes_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let human = app.register(&unique("kapitan")).await;
    let before = app.event_count().await;
    let reply = app
        .post(
            "/v1/matches",
            &human.token,
            json!({ "ranked": true, "opponent": ADMIRAL }),
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.code(), "ranked_against_bot");
    assert!(reply.content_type.starts_with("application/problem+json"));
    assert_eq!(app.event_count().await, before);
}

#[sqlx::test]
async fn a_bot_joins_only_the_matches_it_is_challenged_to(pool: PgPool) {
    let app = spawn_app(pool).await;
    let worker = worker(&app, 0);
    let human = app.register(&unique("kapitan")).await;
    let id = app.create_match(&human, json!({})).await;
    assert_eq!(settle(&app, &worker).await, 0);
    assert_eq!(view(&app, &id, &human).await["phase"], "waiting");
}

#[sqlx::test]
async fn a_rematch_with_a_bot_starts_and_the_bot_plays_it(pool: PgPool) {
    let app = spawn_app(pool).await;
    let worker = worker(&app, 0);
    let human = app.register(&unique("kapitan")).await;
    let id = challenge(
        &app,
        &worker,
        &human,
        BOSMAN,
        json!({ "ruleset": "statki" }),
    )
    .await;
    play(&app, &worker, &id, &human, None).await;
    let asked = app
        .post(
            &format!("/v1/matches/{id}/rematch"),
            &human.token,
            json!({}),
        )
        .await;
    assert_eq!(asked.status, StatusCode::OK, "{:?}", asked.body);
    assert_eq!(asked.body["status"], "offered");
    settle(&app, &worker).await;
    let state = app
        .get(&format!("/v1/matches/{id}/rematch"), Some(&human.token))
        .await;
    assert_eq!(state.body["status"], "started", "{:?}", state.body);
    let rematch = state.body["rematch_id"]
        .as_str()
        .expect("a rematch")
        .to_owned();
    let seen = view(&app, &rematch, &human).await;
    assert_eq!(seen["opponent_fleet_locked"], true, "{seen}");
    let placed = app
        .put(
            &format!("/v1/matches/{rematch}/fleet"),
            &human.token,
            legal_fleet("statki"),
        )
        .await;
    assert_eq!(placed.status, StatusCode::OK, "{:?}", placed.body);
    let seen = play(&app, &worker, &rematch, &human, None).await;
    assert_eq!(seen["phase"], "finished", "{seen}");
}

#[sqlx::test]
async fn a_new_app_instance_carries_on_a_bot_match(pool: PgPool) {
    let first = spawn_app(pool.clone()).await;
    let first_worker = worker(&first, 0);
    let human = first.register(&unique("kapitan")).await;
    let id = challenge(
        &first,
        &first_worker,
        &human,
        ADMIRAL,
        json!({ "ruleset": "classic" }),
    )
    .await;
    play(&first, &first_worker, &id, &human, Some(5)).await;
    drop(first_worker);
    drop(first);
    // A replacement instance on the same database, with a worker of its own.
    let second = spawn_app(pool).await;
    let second_worker = worker(&second, 0);
    let seen = play(&second, &second_worker, &id, &human, None).await;
    assert_eq!(seen["phase"], "finished", "{seen}");
    assert_bot_shots_distinct(&seen, ADMIRAL);
}

#[sqlx::test]
async fn two_workers_never_move_twice_for_one_turn(pool: PgPool) {
    let app = spawn_app(pool).await;
    let one = worker(&app, 0);
    let other = worker(&app, 0);
    let human = app.register(&unique("kapitan")).await;
    let id = challenge(&app, &one, &human, KADET, json!({ "ruleset": "statki" })).await;
    for _ in 0..10 {
        let seen = view(&app, &id, &human).await;
        if seen["turn"] == json!(human.id) {
            let shot = app
                .post(
                    &format!("/v1/matches/{id}/shots"),
                    &human.token,
                    json!({ "cell": next_cell(&seen) }),
                )
                .await;
            assert_eq!(shot.status, StatusCode::OK);
        }
        let now = db_now(&app).await;
        let (a, b) = tokio::join!(one.tick(now), other.tick(now));
        let moves = a.expect("tick").moves + b.expect("tick").moves;
        // Statki passes the turn after every shot: exactly one bot shot per human shot.
        assert_eq!(moves, 1);
    }
}

#[sqlx::test]
async fn a_bot_pauses_but_is_ready_within_two_seconds(pool: PgPool) {
    let app = spawn_app(pool).await;
    let worker = worker(&app, 800);
    let human = app.register(&unique("kapitan")).await;
    let id = app
        .create_match(&human, json!({ "ruleset": "statki", "opponent": BOSMAN }))
        .await;
    let created = db_now(&app).await;
    let at = |ms: i64| created + chrono::Duration::milliseconds(ms);
    assert_eq!(
        worker.tick(created).await.expect("tick").moves,
        0,
        "no pause"
    );
    assert_eq!(worker.tick(at(600)).await.expect("tick").moves, 1, "joined");
    assert_eq!(
        worker.tick(at(1_200)).await.expect("tick").moves,
        1,
        "placed"
    );
    let seen = view(&app, &id, &human).await;
    assert_eq!(seen["opponent_fleet_locked"], true, "{seen}");
}
