//! Helpers shared by the ladder, queue, audit and verify tests: playing matches to their
//! end over the API, driving the clock, reading notices.

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::common::{Player, TestApp, legal_fleet, legal_fleet_cells};

/// The database's time, which is the service's only clock.
pub async fn db_now(app: &TestApp) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Runs the clock task's sweep as if `seconds` had passed.
pub async fn clock_ahead(app: &TestApp, seconds: i64) -> usize {
    let now = db_now(app).await + chrono::Duration::seconds(seconds);
    statki::clock::sweep(&app.app, now).await.unwrap()
}

/// Runs the matchmaking sweep as if `seconds` had passed.
pub async fn matchmaking_ahead(app: &TestApp, seconds: i64) -> statki::app::matchmaking::Sweep {
    let now = db_now(app).await + chrono::Duration::seconds(seconds);
    statki::app::matchmaking::sweep(&app.app, now)
        .await
        .unwrap()
}

/// `a` creates a match with `body`, `b` joins it: placement is under way.
pub async fn started(app: &TestApp, a: &Player, b: &Player, body: Value) -> String {
    let id = app.create_match(a, body).await;
    let joined = app
        .post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
        .await;
    assert_eq!(joined.status, StatusCode::OK, "{:?}", joined.body);
    id
}

pub async fn ranked(app: &TestApp, a: &Player, b: &Player, ruleset: &str) -> String {
    started(app, a, b, json!({ "ruleset": ruleset, "ranked": true })).await
}

pub async fn resign(app: &TestApp, id: &str, player: &Player) -> Value {
    let reply = app
        .post(
            &format!("/v1/matches/{id}/resign"),
            &player.token,
            json!({}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

pub async fn place(app: &TestApp, id: &str, player: &Player, ruleset: &str) {
    let reply = app
        .put(
            &format!("/v1/matches/{id}/fleet"),
            &player.token,
            legal_fleet(ruleset),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
}

/// Cells every test fleet leaves empty (the even rows 2–8).
pub fn empty_cells() -> Vec<String> {
    let mut cells = Vec::new();
    for row in [2, 4, 6, 8] {
        for column in 'A'..='J' {
            cells.push(format!("{column}{row}"));
        }
    }
    cells
}

/// Plays a placed match to the end: `winner` sinks the whole fleet, the other only
/// misses. Returns the number of shots fired.
pub async fn play_out(
    app: &TestApp,
    id: &str,
    winner: &Player,
    loser: &Player,
    ruleset: &str,
) -> usize {
    let mut hits = legal_fleet_cells(ruleset).into_iter();
    let mut misses = empty_cells().into_iter();
    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&winner.token))
        .await;
    let mut turn = view.body["turn"].as_str().unwrap().to_owned();
    let mut shots = 0;
    loop {
        let (shooter, cell) = if turn == winner.id {
            (winner, hits.next().unwrap())
        } else {
            (loser, misses.next().unwrap())
        };
        let reply = app
            .post(
                &format!("/v1/matches/{id}/shots"),
                &shooter.token,
                json!({ "cell": cell }),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        shots += 1;
        if reply.body["phase"] == "finished" {
            return shots;
        }
        turn = reply.body["next_turn"].as_str().unwrap().to_owned();
    }
}

/// A ranked match between `a` and `b` that `winner` wins by sinking everything.
pub async fn ranked_all_sunk(
    app: &TestApp,
    a: &Player,
    b: &Player,
    winner: &Player,
    ruleset: &str,
) -> String {
    let id = ranked(app, a, b, ruleset).await;
    place(app, &id, a, ruleset).await;
    place(app, &id, b, ruleset).await;
    let loser = if winner.id == a.id { b } else { a };
    play_out(app, &id, winner, loser, ruleset).await;
    id
}

/// `player`'s notices of `kind`, oldest first.
pub async fn notices(app: &TestApp, player: &Player, kind: &str) -> Vec<Value> {
    let id = Uuid::parse_str(&player.id).unwrap();
    statki::store::notices::list(&app.pool, id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|notice| notice.kind == kind)
        .map(|notice| notice.payload)
        .collect()
}

/// The match's events as the caller sees them.
pub async fn events(app: &TestApp, id: &str, player: &Player) -> Vec<Value> {
    let reply = app
        .get(&format!("/v1/matches/{id}/events"), Some(&player.token))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body.as_array().unwrap().clone()
}
