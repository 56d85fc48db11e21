//! Whole random matches in every preset, played through HTTP, with the hidden-information
//! check applied to everything each player and a spectator is sent; then every match in
//! the database is rebuilt from its events and compared with its row.

use crate::common;

use std::collections::HashSet;

use common::{Player, TestApp, spawn_app};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use statki::engine::{Event, Match, Snapshot};

fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| strings(item, out)),
        _ => {}
    }
}

fn cells_of(value: &Value) -> HashSet<String> {
    let mut out = Vec::new();
    strings(value, &mut out);
    out.into_iter().collect()
}

/// Places a fleet ship by ship on random cells the server's placement hints offer.
async fn place_randomly(app: &TestApp, id: &str, player: &Player, rng: &mut StdRng) {
    loop {
        let view = app
            .get(&format!("/v1/matches/{id}"), Some(&player.token))
            .await;
        let Some(index) = view.body["next_ship"]["index"].as_u64() else {
            return;
        };
        let orientation = *["horizontal", "vertical"].choose(rng).unwrap();
        let hints = view.body["placement_hints"][orientation]
            .as_array()
            .unwrap();
        let cell = hints
            .choose(rng)
            .expect("a legal bow exists")
            .as_str()
            .unwrap();
        let reply = app
            .put(
                &format!("/v1/matches/{id}/ships/{index}"),
                &player.token,
                json!({"cell": cell, "orientation": orientation}),
            )
            .await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "a hinted bow was refused: {:?}",
            reply.body
        );
    }
}

/// Checks that `viewer`'s view and feed reveal no unfound cell of the opponent's fleet and
/// never which ship a hit belongs to (beyond the preset's type reveal).
async fn check_hidden(
    app: &TestApp,
    id: &str,
    viewer: &Player,
    opponent_cells: &HashSet<String>,
    reveals_type: bool,
) {
    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&viewer.token))
        .await
        .body;
    let found: HashSet<String> = view["shots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|shot| shot["outcome"] != "miss")
        .map(|shot| shot["cell"].as_str().unwrap().to_owned())
        .collect();
    let unfound: HashSet<&String> = opponent_cells.difference(&found).collect();

    let mut opponent_facing = view.clone();
    for private in [
        "fleet",
        "incoming",
        "placement_hints",
        "next_ship",
        "record",
    ] {
        opponent_facing.as_object_mut().unwrap().remove(private);
    }
    // The opponent's side lists shots at the viewer's own sea.
    let sides = opponent_facing["sides"].as_array_mut().unwrap();
    sides.retain(|side| side["player"] == viewer.id.as_str());
    for leaked in cells_of(&opponent_facing) {
        assert!(
            !unfound.contains(&leaked),
            "view leaked unfound ship cell {leaked}: {view}"
        );
    }
    for sunk in view["sunk"].as_array().unwrap() {
        assert!(
            sunk.get("index").is_none(),
            "a sunk ship's index leaked: {sunk}"
        );
        assert_eq!(sunk.get("name").is_some(), reveals_type, "{sunk}");
        for cell in sunk["cells"].as_array().unwrap() {
            assert!(
                found.contains(cell.as_str().unwrap()),
                "sunk cell not found by shots"
            );
        }
    }

    let feed = app
        .get(&format!("/v1/matches/{id}/events"), Some(&viewer.token))
        .await
        .body;
    for event in feed.as_array().unwrap() {
        let mine = event["player"] == viewer.id.as_str();
        match event["kind"].as_str().unwrap() {
            "ship_placed" if !mine => {
                assert!(
                    event.get("placement").is_none(),
                    "opponent placement leaked: {event}"
                )
            }
            "fleet_locked" if !mine => {
                assert!(event.get("salt").is_none(), "opponent salt leaked: {event}")
            }
            "ship_placed" | "fleet_locked" => {}
            "shot_fired" if !mine => {}
            _ => {
                if let Some(sunk) = event.get("sunk_ship") {
                    assert!(sunk.get("index").is_none(), "sunk index leaked: {event}");
                    assert_eq!(sunk.get("name").is_some(), reveals_type, "{event}");
                }
                for leaked in cells_of(event) {
                    assert!(!unfound.contains(&leaked), "feed leaked {leaked}: {event}");
                }
            }
        }
    }
}

async fn check_spectator(app: &TestApp, id: &str, spectator: &Player) {
    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&spectator.token))
        .await
        .body;
    for private in ["fleet", "incoming", "placement_hints", "shots", "sunk"] {
        assert!(view.get(private).is_none(), "spectator got `{private}`");
    }
    assert_eq!(view["record"], Value::Null);
    let feed = app
        .get(&format!("/v1/matches/{id}/events"), Some(&spectator.token))
        .await
        .body;
    for event in feed.as_array().unwrap() {
        assert!(
            event.get("placement").is_none(),
            "spectator saw a placement: {event}"
        );
        assert!(event.get("salt").is_none(), "spectator saw a salt: {event}");
        assert!(
            event
                .get("sunk_ship")
                .is_none_or(|s| s.get("index").is_none()),
            "{event}"
        );
    }
}

async fn fleet_cells(app: &TestApp, id: &str, player: &Player) -> HashSet<String> {
    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&player.token))
        .await
        .body;
    view["fleet"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|ship| ship["cells"].as_array().unwrap().clone())
        .map(|cell| cell.as_str().unwrap().to_owned())
        .collect()
}

async fn play_random_match(app: &TestApp, ruleset: &str, options: Value, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let a = app.register(&common::unique("a")).await;
    let b = app.register(&common::unique("b")).await;
    let spectator = app.register(&common::unique("s")).await;
    let id = app
        .create_match(&a, json!({"ruleset": ruleset, "options": options}))
        .await;
    app.post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
        .await;
    place_randomly(app, &id, &a, &mut rng).await;
    place_randomly(app, &id, &b, &mut rng).await;
    let fleets = [
        fleet_cells(app, &id, &a).await,
        fleet_cells(app, &id, &b).await,
    ];
    let reveals_type = ruleset == "battaglia";
    let players = [a.clone(), b.clone()];

    let mut shots = 0;
    loop {
        let view = app
            .get(&format!("/v1/matches/{id}"), Some(&a.token))
            .await
            .body;
        if view["phase"] == "finished" {
            break;
        }
        assert_eq!(view["phase"], "battle");
        let on_turn = if view["turn"] == a.id.as_str() { 0 } else { 1 };
        let shooter = &players[on_turn];
        let own = app
            .get(&format!("/v1/matches/{id}"), Some(&shooter.token))
            .await
            .body;
        let mut known = cells_of(&own["shots"]);
        known.extend(cells_of(&own["marked"]));
        let free: Vec<String> = statki::engine::Cell::all()
            .map(|cell| cell.to_string())
            .filter(|cell| !known.contains(cell))
            .collect();
        let cell = free.choose(&mut rng).unwrap().clone();
        let answer = app
            .post(
                &format!("/v1/matches/{id}/shots"),
                &shooter.token,
                json!({ "cell": cell }),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        let expected_hit = fleets[1 - on_turn].contains(&cell);
        assert_eq!(
            answer.body["outcome"] != "miss",
            expected_hit,
            "{cell}: {:?}",
            answer.body
        );
        shots += 1;
        assert!(shots <= 200, "a match cannot need more than 200 shots");
        if answer.body["phase"] == "finished" {
            break;
        }
        if shots % 7 == 0 || rng.random_bool(0.1) {
            check_hidden(app, &id, &a, &fleets[1], reveals_type).await;
            check_hidden(app, &id, &b, &fleets[0], reveals_type).await;
            check_spectator(app, &id, &spectator).await;
        }
    }

    let end = app
        .get(&format!("/v1/matches/{id}"), Some(&spectator.token))
        .await
        .body;
    assert_eq!(end["phase"], "finished");
    assert_eq!(end["result"]["reason"], "all_sunk");
    let winner = end["result"]["winner"].as_str().unwrap();
    let loser = if winner == a.id { 1 } else { 0 };
    // The winner found every cell of the loser's fleet.
    let winner_side = end["sides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["player"] == winner)
        .unwrap();
    let winner_hits: HashSet<String> = winner_side["shots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|shot| shot["outcome"] != "miss")
        .map(|shot| shot["cell"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(winner_hits, fleets[loser]);
    let record = end["record"].as_array().unwrap();
    assert!(
        record
            .iter()
            .all(|side| side["commitment_verified"] == true),
        "{record:?}"
    );
    let finished: Vec<Value> = app
        .get(&format!("/v1/matches/{id}/events"), Some(&spectator.token))
        .await
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["kind"] == "match_finished")
        .cloned()
        .collect();
    assert_eq!(finished.len(), 1, "exactly one result");
}

#[sqlx::test]
async fn random_statki_matches_reveal_nothing_and_end_with_one_result(pool: PgPool) {
    let app = spawn_app(pool).await;
    for seed in 0..2 {
        play_random_match(&app, "statki", json!({}), seed).await;
    }
    rebuild_every_match(&app).await;
}

#[sqlx::test]
async fn random_classic_matches_reveal_nothing_and_end_with_one_result(pool: PgPool) {
    let app = spawn_app(pool).await;
    for seed in 10..12 {
        play_random_match(&app, "classic", json!({}), seed).await;
    }
    rebuild_every_match(&app).await;
}

#[sqlx::test]
async fn random_battaglia_matches_with_and_without_the_house_rule(pool: PgPool) {
    let app = spawn_app(pool).await;
    play_random_match(&app, "battaglia", json!({}), 20).await;
    play_random_match(&app, "battaglia", json!({"extra_shot_on_hit": true}), 21).await;
    rebuild_every_match(&app).await;
}

/// Replays every match's events and compares the result with the stored row.
async fn rebuild_every_match(app: &TestApp) {
    let ids = statki::store::matches::all_ids(&app.pool).await.unwrap();
    assert!(!ids.is_empty());
    for id in ids {
        let events: Vec<Event> = statki::store::events::list(&app.pool, id, 0, i64::MAX)
            .await
            .unwrap()
            .into_iter()
            .map(|stored| stored.event)
            .collect();
        let folded = Match::fold(&events).expect("the log folds");
        let stored: Value = sqlx::query_scalar("SELECT snapshot FROM matches WHERE id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
        let stored: Snapshot = serde_json::from_value(stored).unwrap();
        assert_eq!(
            folded.snapshot(),
            stored,
            "match {id}: row and events disagree"
        );
        let (phase, last_seq): (String, i64) =
            sqlx::query_as("SELECT phase, last_seq FROM matches WHERE id = $1")
                .bind(id)
                .fetch_one(&app.pool)
                .await
                .unwrap();
        assert_eq!(phase, folded.phase.as_str());
        assert_eq!(last_seq as usize, events.len());
    }
}
