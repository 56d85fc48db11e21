//! Black-box tests of the HTTP API: every endpoint, every refusal (and that a refusal
//! stores nothing), idempotency, races, and whole matches with the hidden-information check.

use crate::common;

use common::{Player, TestApp, legal_fleet, spawn_app};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

/// Sends a request expected to be refused; checks status, problem code and content type,
/// and that nothing was stored.
async fn assert_refused(
    app: &TestApp,
    request: impl std::future::Future<Output = common::Reply>,
    status: StatusCode,
    code: &str,
) {
    let before = app.event_count().await;
    let reply = request.await;
    assert_eq!(reply.status, status, "{code}: {:?}", reply.body);
    assert_eq!(reply.code(), code, "{:?}", reply.body);
    assert_eq!(reply.content_type, "application/problem+json");
    assert_eq!(reply.body["status"], status.as_u16());
    assert!(reply.body["detail"].as_str().is_some_and(|d| !d.is_empty()));
    assert_eq!(
        app.event_count().await,
        before,
        "a refused `{code}` stored events"
    );
}

#[sqlx::test]
async fn registering_returns_an_id_and_a_working_token(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let profile = app.get(&format!("/v1/players/{}", ala.id), None).await;
    assert_eq!(profile.status, StatusCode::OK);
    assert_eq!(profile.body["name"], "Ala");
    assert_eq!(profile.body["wins"], 0);
    let mine = app
        .get(&format!("/v1/players/{}/matches", ala.id), Some(&ala.token))
        .await;
    assert_eq!(mine.status, StatusCode::OK);
    assert_eq!(mine.body, json!({"matches": []}));
}

#[sqlx::test]
async fn player_names_are_unique_regardless_of_case_and_validated(pool: PgPool) {
    let app = spawn_app(pool).await;
    app.register("Ala").await;
    let post = |body: Value| app.send(app.client.post(app.url("/v1/players")).json(&body));
    assert_refused(
        &app,
        post(json!({"name": "ALA"})),
        StatusCode::CONFLICT,
        "name_taken",
    )
    .await;
    for bad in ["", " Ala2", "x".repeat(33).as_str(), "tab\there"] {
        assert_refused(
            &app,
            post(json!({ "name": bad })),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_name",
        )
        .await;
    }
    let longest = "ż".repeat(32);
    assert_eq!(
        post(json!({ "name": longest })).await.status,
        StatusCode::CREATED
    );
}

#[sqlx::test]
async fn malformed_bodies_are_refused_with_codes(pool: PgPool) {
    let app = spawn_app(pool).await;
    let raw = |body: &'static str| {
        app.send(
            app.client
                .post(app.url("/v1/players"))
                .header("content-type", "application/json")
                .body(body),
        )
    };
    assert_refused(
        &app,
        raw("{not json"),
        StatusCode::BAD_REQUEST,
        "invalid_json",
    )
    .await;
    assert_refused(
        &app,
        raw(r#"{"name": 5}"#),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_body",
    )
    .await;
    assert_refused(
        &app,
        raw(r#"{"name": "Ala", "admin": true}"#),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_body",
    )
    .await;
    let no_type = app.send(
        app.client
            .post(app.url("/v1/players"))
            .body(r#"{"name":"x"}"#),
    );
    assert_refused(
        &app,
        no_type,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let huge = format!(r#"{{"name": "{}"}}"#, "a".repeat(20_000));
    let too_large = app.send(
        app.client
            .post(app.url("/v1/players"))
            .header("content-type", "application/json")
            .body(huge),
    );
    assert_refused(
        &app,
        too_large,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;
}

#[sqlx::test]
async fn tokens_are_required_and_checked(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let create = |token: Option<String>| {
        let mut request = app.client.post(app.url("/v1/matches")).json(&json!({}));
        if let Some(token) = token {
            request = request.header("authorization", token);
        }
        app.send(request)
    };
    assert_refused(&app, create(None), StatusCode::UNAUTHORIZED, "unauthorized").await;
    assert_refused(
        &app,
        create(Some(ala.token.clone())),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert_refused(
        &app,
        create(Some("Bearer not-a-jwt".into())),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    let forged = statki::auth::Tokens::new(b"another-secret-that-is-at-least-32-bytes")
        .unwrap()
        .mint(ala.id.parse().unwrap(), chrono::Utc::now())
        .unwrap();
    assert_refused(
        &app,
        create(Some(format!("Bearer {forged}"))),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    let expired = statki::auth::Tokens::new(common::SECRET)
        .unwrap()
        .mint(
            ala.id.parse().unwrap(),
            chrono::Utc::now() - chrono::Duration::days(31),
        )
        .unwrap();
    let reply = create(Some(format!("Bearer {expired}"))).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(reply.body["detail"].as_str().unwrap().contains("expired"));
    // A valid token for a player that does not exist cannot create anything.
    let ghost = statki::auth::Tokens::new(common::SECRET)
        .unwrap()
        .mint(uuid::Uuid::new_v4(), chrono::Utc::now())
        .unwrap();
    assert_refused(
        &app,
        create(Some(format!("Bearer {ghost}"))),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    let lowercase = create(Some(format!("bearer {}", ala.token))).await;
    assert_eq!(
        lowercase.status,
        StatusCode::CREATED,
        "the scheme is case-insensitive"
    );
}

#[sqlx::test]
async fn rulesets_describe_the_three_presets(pool: PgPool) {
    let app = spawn_app(pool).await;
    let reply = app.get("/v1/rulesets", None).await;
    assert_eq!(reply.status, StatusCode::OK);
    let sets = reply.body["rulesets"].as_array().unwrap();
    let ids: Vec<&str> = sets.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["statki", "classic", "battaglia"]);
    assert_eq!(sets[0]["fleet_cells"], 17);
    assert_eq!(sets[1]["fleet_cells"], 20);
    assert_eq!(sets[2]["fleet_cells"], 18);
    assert_eq!(sets[0]["ships_may_touch"], true);
    assert_eq!(sets[1]["extra_shot_on_hit"], true);
    assert_eq!(sets[2]["sink_reveals"]["ship_type"], true);
    assert_eq!(
        sets[0]["clock"],
        json!({"placement_seconds": 120, "shot_seconds": 30})
    );
}

#[sqlx::test]
async fn creating_matches_validates_rules_and_clocks(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let create = |body: Value| app.post("/v1/matches", &ala.token, body);
    let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
    assert_refused(
        &app,
        create(json!({"ruleset": "chess"})),
        unprocessable,
        "unknown_ruleset",
    )
    .await;
    // The extra shot is a house rule of every preset, as the document's schema allows it.
    for ruleset in ["statki", "classic", "battaglia"] {
        let house =
            create(json!({"ruleset": ruleset, "options": {"extra_shot_on_hit": true}})).await;
        assert_eq!(
            house.status,
            StatusCode::CREATED,
            "{ruleset}: {:?}",
            house.body
        );
        assert_eq!(
            house.body["rules"]["options"]["extra_shot_on_hit"], true,
            "{ruleset}"
        );
        let withdrawn = app
            .post(
                &format!("/v1/matches/{}/resign", house.body["id"].as_str().unwrap()),
                &ala.token,
                json!({}),
            )
            .await;
        assert_eq!(withdrawn.status, StatusCode::OK, "{:?}", withdrawn.body);
    }
    assert_refused(
        &app,
        create(
            json!({"ruleset": "battaglia", "ranked": true, "options": {"extra_shot_on_hit": true}}),
        ),
        unprocessable,
        "ranked_needs_standard_rules",
    )
    .await;
    assert_refused(
        &app,
        create(json!({"ranked": true, "clock": {"placement_seconds": 60, "shot_seconds": 10}})),
        unprocessable,
        "ranked_needs_standard_rules",
    )
    .await;
    assert_refused(
        &app,
        create(json!({"clock": {"placement_seconds": 60, "shot_seconds": 1}})),
        unprocessable,
        "invalid_option",
    )
    .await;
    assert_refused(
        &app,
        create(json!({"opponent": ala.id})),
        StatusCode::CONFLICT,
        "own_match",
    )
    .await;
    assert_refused(
        &app,
        create(json!({"opponent": uuid::Uuid::new_v4()})),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;

    let reply = create(
        json!({"ruleset": "battaglia", "options": {"extra_shot_on_hit": true},
                              "clock": {"placement_seconds": 60, "shot_seconds": 10}}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    let view = &reply.body;
    assert_eq!(view["phase"], "waiting");
    assert_eq!(view["ruleset"], "battaglia");
    assert_eq!(view["you"], ala.id.as_str());
    assert_eq!(view["rules"]["clock"]["shot_seconds"], 10);
    assert_eq!(
        view["deadline_ms_left"], 900_000,
        "the join clock is 15 minutes"
    );
    let default = create(json!({})).await;
    assert_eq!(default.body["ruleset"], "statki");
}

#[sqlx::test]
async fn open_matches_list_only_joinable_ones(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let bolek = app.register("Bolek").await;
    let lolek = app.register("Lolek").await;
    let open = app.create_match(&ala, json!({})).await;
    let challenge = app.create_match(&ala, json!({"opponent": bolek.id})).await;
    let ids = |reply: &common::Reply| -> Vec<String> {
        reply.body["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let for_bolek = app.get("/v1/matches?status=open", Some(&bolek.token)).await;
    // Newest first; the challenge names its opponent.
    assert_eq!(ids(&for_bolek), [challenge.clone(), open.clone()]);
    let for_lolek = app.get("/v1/matches?status=open", Some(&lolek.token)).await;
    assert_eq!(ids(&for_lolek), std::slice::from_ref(&open));
    let bad = app
        .get("/v1/matches?status=finished", Some(&lolek.token))
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::BAD_REQUEST, "invalid_query")
    );
    app.post(&format!("/v1/matches/{open}/join"), &lolek.token, json!({}))
        .await;
    let after = app.get("/v1/matches?status=open", Some(&bolek.token)).await;
    assert_eq!(ids(&after), [challenge]);
}

#[sqlx::test]
async fn joining_is_refused_for_the_creator_the_uninvited_and_a_full_match(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let bolek = app.register("Bolek").await;
    let lolek = app.register("Lolek").await;
    let id = app.create_match(&ala, json!({"opponent": bolek.id})).await;
    let join =
        |player: &Player| app.post(&format!("/v1/matches/{id}/join"), &player.token, json!({}));
    assert_refused(&app, join(&ala), StatusCode::CONFLICT, "own_match").await;
    assert_refused(&app, join(&lolek), StatusCode::FORBIDDEN, "not_invited").await;
    let joined = join(&bolek).await;
    assert_eq!(joined.status, StatusCode::OK);
    assert_eq!(joined.body["phase"], "placement");
    assert_eq!(joined.body["deadline_ms_left"], 120_000);
    assert_refused(&app, join(&lolek), StatusCode::CONFLICT, "wrong_phase").await;
    let missing = uuid::Uuid::new_v4();
    assert_refused(
        &app,
        app.post(
            &format!("/v1/matches/{missing}/join"),
            &lolek.token,
            json!({}),
        ),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_refused(
        &app,
        app.post("/v1/matches/not-a-uuid/join", &lolek.token, json!({})),
        StatusCode::BAD_REQUEST,
        "invalid_path",
    )
    .await;
}

#[sqlx::test]
async fn placement_asks_for_ships_in_order_and_refuses_illegal_ones(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let bolek = app.register("Bolek").await;
    let lolek = app.register("Lolek").await;
    let id = app.create_match(&ala, json!({})).await;
    let ship = |player: &Player, index: &str, cell: &str, orientation: &str| {
        app.put(
            &format!("/v1/matches/{id}/ships/{index}"),
            &player.token,
            json!({"cell": cell, "orientation": orientation}),
        )
    };
    let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
    assert_refused(
        &app,
        ship(&ala, "0", "A1", "horizontal"),
        StatusCode::CONFLICT,
        "wrong_phase",
    )
    .await;
    app.post(&format!("/v1/matches/{id}/join"), &bolek.token, json!({}))
        .await;

    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&ala.token))
        .await;
    assert_eq!(
        view.body["next_ship"],
        json!({"index": 0, "name": "Carrier", "length": 5})
    );
    let hints = &view.body["placement_hints"];
    assert_eq!(
        hints["horizontal"].as_array().unwrap().len(),
        60,
        "6 bow columns × 10 rows"
    );
    assert_eq!(hints["vertical"].as_array().unwrap().len(), 60);

    assert_refused(
        &app,
        ship(&ala, "0", "G1", "horizontal"),
        unprocessable,
        "off_board",
    )
    .await;
    assert_refused(
        &app,
        ship(&ala, "0", "K1", "horizontal"),
        unprocessable,
        "off_board",
    )
    .await;
    assert_refused(
        &app,
        ship(&ala, "0", "A0", "vertical"),
        unprocessable,
        "off_board",
    )
    .await;
    assert_refused(
        &app,
        ship(&ala, "0", "hello", "vertical"),
        unprocessable,
        "invalid_cell",
    )
    .await;
    assert_refused(
        &app,
        ship(&ala, "0", "A1", "diagonal"),
        unprocessable,
        "invalid_body",
    )
    .await;
    assert_refused(
        &app,
        ship(&ala, "9", "A1", "vertical"),
        unprocessable,
        "unknown_ship",
    )
    .await;
    assert_refused(
        &app,
        ship(&ala, "x", "A1", "vertical"),
        StatusCode::BAD_REQUEST,
        "invalid_path",
    )
    .await;
    assert_refused(
        &app,
        ship(&lolek, "0", "A1", "horizontal"),
        StatusCode::FORBIDDEN,
        "not_a_player",
    )
    .await;
    assert_refused(
        &app,
        app.delete(&format!("/v1/matches/{id}/ships/0"), &ala.token),
        StatusCode::CONFLICT,
        "ship_not_placed",
    )
    .await;

    let placed = ship(&ala, "0", "a1", "horizontal").await;
    assert_eq!(placed.status, StatusCode::OK, "{:?}", placed.body);
    assert_eq!(
        placed.body["fleet"][0]["cells"],
        json!(["A1", "B1", "C1", "D1", "E1"])
    );
    assert_eq!(placed.body["next_ship"]["index"], 1);
    assert_refused(
        &app,
        ship(&ala, "1", "C1", "vertical"),
        unprocessable,
        "overlap",
    )
    .await;
    // Touching is allowed in statki.
    assert_eq!(
        ship(&ala, "1", "A2", "horizontal").await.status,
        StatusCode::OK
    );
    // Moving a placed ship, then picking one up.
    let moved = ship(&ala, "1", "A3", "horizontal").await;
    assert_eq!(
        moved.body["fleet"][1]["cells"],
        json!(["A3", "B3", "C3", "D3"])
    );
    let removed = app
        .delete(&format!("/v1/matches/{id}/ships/0"), &ala.token)
        .await;
    assert_eq!(removed.status, StatusCode::OK);
    assert_eq!(removed.body["next_ship"]["index"], 0);
    assert_eq!(removed.body["fleet"][0]["placement"], Value::Null);

    for (index, cell) in [("0", "A1"), ("2", "A5"), ("3", "A7")] {
        assert_eq!(
            ship(&ala, index, cell, "horizontal").await.status,
            StatusCode::OK
        );
    }
    let last = ship(&ala, "4", "A9", "horizontal").await;
    assert_eq!(
        last.body["fleet_locked"], true,
        "placing the last ship locks the fleet"
    );
    assert_eq!(last.body["next_ship"], Value::Null);
    assert_eq!(last.body["placement_hints"], Value::Null);
    assert_refused(
        &app,
        ship(&ala, "4", "F9", "horizontal"),
        StatusCode::CONFLICT,
        "fleet_locked",
    )
    .await;
    assert_refused(
        &app,
        app.put(
            &format!("/v1/matches/{id}/fleet"),
            &ala.token,
            legal_fleet("statki"),
        ),
        StatusCode::CONFLICT,
        "fleet_locked",
    )
    .await;
    let bolek_view = app
        .get(&format!("/v1/matches/{id}"), Some(&bolek.token))
        .await;
    assert_eq!(bolek_view.body["opponent_fleet_locked"], true);
    assert_eq!(bolek_view.body["fleet_locked"], false);
}

#[sqlx::test]
async fn classic_refuses_touching_ships_and_whole_fleets_of_the_wrong_size(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, ala, _) = app.placement_match("classic").await;
    let put = |body: Value| app.put(&format!("/v1/matches/{id}/fleet"), &ala.token, body);
    let mut touching = legal_fleet("classic");
    touching["ships"][1]["cell"] = json!("E1");
    assert_refused(
        &app,
        put(touching),
        StatusCode::UNPROCESSABLE_ENTITY,
        "ships_touching",
    )
    .await;
    let mut corner = legal_fleet("classic");
    corner["ships"][2] = json!({"cell": "E2", "orientation": "horizontal"});
    assert_refused(
        &app,
        put(corner),
        StatusCode::UNPROCESSABLE_ENTITY,
        "ships_touching",
    )
    .await;
    let short = json!({"ships": [{"cell": "A1", "orientation": "horizontal"}]});
    assert_refused(
        &app,
        put(short),
        StatusCode::UNPROCESSABLE_ENTITY,
        "wrong_fleet_size",
    )
    .await;
    let reply = put(legal_fleet("classic")).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert_eq!(reply.body["fleet_locked"], true);
}

#[sqlx::test]
async fn firing_follows_the_turn_and_refuses_repeats(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, second) = app.battle_match("statki").await;
    let lolek = app.register("Lolek").await;
    let fire = |player: &Player, cell: &str| {
        app.post(
            &format!("/v1/matches/{id}/shots"),
            &player.token,
            json!({"cell": cell}),
        )
    };
    let conflict = StatusCode::CONFLICT;
    assert_refused(&app, fire(&second, "A1"), conflict, "not_your_turn").await;
    assert_refused(
        &app,
        fire(&lolek, "A1"),
        StatusCode::FORBIDDEN,
        "not_a_player",
    )
    .await;
    assert_refused(
        &app,
        fire(&first, "J11"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "off_board",
    )
    .await;
    assert_refused(
        &app,
        fire(&first, "11"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_cell",
    )
    .await;

    let hit = fire(&first, "A1").await;
    assert_eq!(hit.status, StatusCode::OK, "{:?}", hit.body);
    assert_eq!(hit.body["outcome"], "hit");
    assert_eq!(hit.body["sunk_ship"], Value::Null);
    assert_eq!(
        hit.body["next_turn"],
        second.id.as_str(),
        "statki passes the turn after a hit"
    );
    assert_eq!(hit.body["deadline_ms_left"], 30_000);
    let miss = fire(&second, "J10").await;
    assert_eq!(miss.body["outcome"], "miss");
    assert_refused(&app, fire(&first, "A1"), conflict, "already_shot").await;

    // Sink the destroyer at A9–B9.
    fire(&first, "A9").await;
    fire(&second, "J9").await;
    let sunk = fire(&first, "B9").await;
    assert_eq!(sunk.body["outcome"], "sunk");
    assert_eq!(
        sunk.body["sunk_ship"],
        json!({"cells": ["A9", "B9"]}),
        "no index, no name"
    );

    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&second.token))
        .await;
    let incoming: Vec<&str> = view.body["incoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["cell"].as_str().unwrap())
        .collect();
    assert_eq!(incoming, ["A1", "A9", "B9"]);
    assert_eq!(view.body["fleet"][4]["sunk"], true);
    assert_eq!(view.body["fleet"][0]["hits"], json!(["A1"]));
}

#[sqlx::test]
async fn classic_keeps_the_turn_after_a_hit_and_marks_around_a_sink(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, second) = app.battle_match("classic").await;
    let fire = |player: &Player, cell: &str| {
        app.post(
            &format!("/v1/matches/{id}/shots"),
            &player.token,
            json!({"cell": cell}),
        )
    };
    // D5 is a torpedo boat in the legal classic fleet.
    let sunk = fire(&first, "D5").await;
    assert_eq!(sunk.body["outcome"], "sunk");
    assert_eq!(sunk.body["next_turn"], first.id.as_str());
    let marked: Vec<&str> = sunk.body["marked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(marked, ["C4", "D4", "E4", "C5", "E5", "C6", "D6", "E6"]);
    let known = fire(&first, "C4").await;
    assert_eq!(
        (known.status, known.code()),
        (StatusCode::CONFLICT, "already_known")
    );
    let miss = fire(&first, "J10").await;
    assert_eq!(
        miss.body["next_turn"],
        second.id.as_str(),
        "a miss passes the turn"
    );
}

#[sqlx::test]
async fn battaglia_names_the_sunk_ship(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, _) = app.battle_match("battaglia").await;
    let sunk = app
        .post(
            &format!("/v1/matches/{id}/shots"),
            &first.token,
            json!({"cell": "J10"}),
        )
        .await;
    assert_eq!(sunk.body["outcome"], "sunk");
    assert_eq!(
        sunk.body["sunk_ship"],
        json!({"name": "Motovedetta", "cells": ["J10"]})
    );
}

#[sqlx::test]
async fn resigning_ends_the_match_and_opens_the_record(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, second) = app.battle_match("statki").await;
    let resigned = app
        .post(
            &format!("/v1/matches/{id}/resign"),
            &second.token,
            json!({}),
        )
        .await;
    assert_eq!(resigned.status, StatusCode::OK);
    assert_eq!(resigned.body["phase"], "finished");
    assert_eq!(
        resigned.body["result"],
        json!({"winner": first.id, "reason": "resigned"})
    );
    let record = resigned.body["record"].as_array().unwrap();
    assert!(
        record
            .iter()
            .all(|side| side["commitment_verified"] == true)
    );
    assert!(
        record
            .iter()
            .all(|side| side["salt"].as_str().is_some_and(|s| s.len() == 32))
    );
    assert_refused(
        &app,
        app.post(&format!("/v1/matches/{id}/resign"), &first.token, json!({})),
        StatusCode::CONFLICT,
        "wrong_phase",
    )
    .await;
    assert_refused(
        &app,
        app.post(
            &format!("/v1/matches/{id}/shots"),
            &first.token,
            json!({"cell": "A1"}),
        ),
        StatusCode::CONFLICT,
        "wrong_phase",
    )
    .await;
    // After the end, anyone sees the full event record, placements and salts included.
    let lolek = app.register("Lolek").await;
    let events = app
        .get(&format!("/v1/matches/{id}/events"), Some(&lolek.token))
        .await;
    let events = events.body.as_array().unwrap();
    assert!(
        events
            .iter()
            .filter(|e| e["kind"] == "ship_placed")
            .all(|e| e["placement"].is_object())
    );
    assert!(
        events
            .iter()
            .filter(|e| e["kind"] == "fleet_locked")
            .all(|e| e["salt"].is_string())
    );
    let profile = app.get(&format!("/v1/players/{}", first.id), None).await;
    assert_eq!(profile.body["wins"], 1);
}

#[sqlx::test]
async fn the_creator_may_withdraw_an_unjoined_match(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let id = app.create_match(&ala, json!({})).await;
    let withdrawn = app
        .post(&format!("/v1/matches/{id}/resign"), &ala.token, json!({}))
        .await;
    assert_eq!(withdrawn.body["phase"], "cancelled");
    assert_eq!(withdrawn.body["result"], Value::Null);
}

#[sqlx::test]
async fn spectators_see_shots_and_sunk_ships_but_no_fleets(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, _) = app.battle_match("statki").await;
    app.post(
        &format!("/v1/matches/{id}/shots"),
        &first.token,
        json!({"cell": "A1"}),
    )
    .await;
    let lolek = app.register("Lolek").await;
    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&lolek.token))
        .await;
    assert_eq!(view.status, StatusCode::OK);
    assert_eq!(view.body["you"], Value::Null);
    assert!(
        view.body.get("fleet").is_none(),
        "spectators have no fleet field"
    );
    assert!(view.body.get("incoming").is_none());
    let shots = &view.body["sides"];
    let total: usize = shots
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["shots"].as_array().unwrap().len())
        .sum();
    assert_eq!(total, 1);
    assert!(
        shots
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["commitment"].is_string())
    );
    let events = app
        .get(
            &format!("/v1/matches/{id}/events?after=2"),
            Some(&lolek.token),
        )
        .await;
    let events = events.body.as_array().unwrap();
    assert_eq!(events[0]["seq"], 3, "after=2 starts at seq 3");
    for event in events {
        assert!(
            event.get("placement").is_none(),
            "a spectator saw a placement: {event}"
        );
        assert!(
            event.get("salt").is_none(),
            "a spectator saw a salt: {event}"
        );
    }
}

#[sqlx::test]
async fn an_idempotent_retry_returns_the_first_answer_and_stores_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, _) = app.battle_match("statki").await;
    let shoot = |key: &str, cell: &str| {
        app.send(
            app.client
                .post(app.url(&format!("/v1/matches/{id}/shots")))
                .bearer_auth(&first.token)
                .header("idempotency-key", key)
                .json(&json!({"cell": cell})),
        )
    };
    let answer = shoot("shot-1", "C3").await;
    assert_eq!(answer.status, StatusCode::OK);
    let count = app.event_count().await;
    let retry = shoot("shot-1", "C3").await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.body, answer.body);
    assert_eq!(app.event_count().await, count);
    let other = shoot("shot-1", "D4").await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
    assert_eq!(app.event_count().await, count);

    let ala = app.register("Ala").await;
    let create = || {
        app.send(
            app.client
                .post(app.url("/v1/matches"))
                .bearer_auth(&ala.token)
                .header("idempotency-key", "create-1")
                .json(&json!({"ruleset": "classic"})),
        )
    };
    let (one, two) = tokio::join!(create(), create());
    assert_eq!(one.status, StatusCode::CREATED);
    assert_eq!(two.status, StatusCode::CREATED);
    assert_eq!(
        one.body["id"], two.body["id"],
        "concurrent duplicates make one match"
    );
    let ala_matches: i64 = sqlx::query_scalar("SELECT count(*) FROM matches WHERE creator = $1")
        .bind(uuid::Uuid::parse_str(&ala.id).unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(ala_matches, 1);
}

#[sqlx::test]
async fn fifty_concurrent_shots_are_accepted_exactly_once(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, _) = app.battle_match("statki").await;
    let count = app.event_count().await;
    let columns = ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"];
    let shots = (0..50).map(|n| {
        let cell = format!("{}{}", columns[n % 10], n / 10 + 1);
        app.post(
            &format!("/v1/matches/{id}/shots"),
            &first.token,
            json!({ "cell": cell }),
        )
    });
    let replies = futures::future::join_all(shots).await;
    let accepted = replies
        .iter()
        .filter(|r| r.status == StatusCode::OK)
        .count();
    assert_eq!(
        accepted,
        1,
        "{:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(
        replies
            .iter()
            .filter(|r| r.status != StatusCode::OK)
            .all(|r| r.code() == "not_your_turn"),
        "{:?}",
        replies.iter().map(|r| r.body.clone()).collect::<Vec<_>>()
    );
    assert_eq!(app.event_count().await, count + 1);
}

#[sqlx::test]
async fn system_routes_answer(pool: PgPool) {
    let app = spawn_app(pool).await;
    assert_eq!(app.get("/healthz", None).await.status, StatusCode::OK);
    assert_eq!(app.get("/readyz", None).await.status, StatusCode::OK);
    let (_, first, _) = app.battle_match("statki").await;
    let _ = first;
    // The database gauges are refreshed in the background, not by the scrape.
    statki::housekeeping::refresh_gauges(&app.pool)
        .await
        .unwrap();
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("statki_http_requests_total"), "{metrics}");
    assert!(
        metrics.contains("statki_matches{phase=\"battle\"}"),
        "{metrics}"
    );
    let missing = app.get("/v1/nothing-here", None).await;
    assert_eq!(
        (missing.status, missing.code()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let wrong = app.send(app.client.patch(app.url("/v1/rulesets"))).await;
    assert_eq!(
        (wrong.status, wrong.code()),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    let response = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert!(response.headers().contains_key("x-request-id"));
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/v1/matches"))
        .header("origin", "https://play.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(
        preflight
            .headers()
            .get("access-control-allow-origin")
            .unwrap(),
        "https://play.example"
    );
    let yaml = app
        .client
        .get(app.url("/openapi.yaml"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        yaml.starts_with("openapi: 3.1"),
        "{}",
        &yaml[..40.min(yaml.len())]
    );
}

#[test]
fn the_committed_openapi_document_matches_the_code() {
    let generated = statki::http::openapi().to_yaml().expect("yaml");
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml exists");
    assert!(
        committed == generated,
        "openapi.yaml is out of date: run `cargo run -q -- openapi > openapi.yaml`"
    );
}

#[sqlx::test]
async fn a_command_after_the_deadline_enforces_the_clock_first(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let bolek = app.register("Bolek").await;
    let id = app
        .create_match(
            &ala,
            json!({"clock": {"placement_seconds": 5, "shot_seconds": 2}}),
        )
        .await;
    app.post(&format!("/v1/matches/{id}/join"), &bolek.token, json!({}))
        .await;
    for player in [&ala, &bolek] {
        let placed = app
            .put(
                &format!("/v1/matches/{id}/fleet"),
                &player.token,
                legal_fleet("statki"),
            )
            .await;
        assert_eq!(placed.status, StatusCode::OK);
    }
    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&ala.token))
        .await;
    let (on_turn, other) = if view.body["turn"] == ala.id.as_str() {
        (&ala, &bolek)
    } else {
        (&bolek, &ala)
    };
    // No clock task runs in this test app: only the command itself can notice the deadline.
    tokio::time::sleep(std::time::Duration::from_millis(2300)).await;
    let late = || {
        app.send(
            app.client
                .post(app.url(&format!("/v1/matches/{id}/shots")))
                .bearer_auth(&on_turn.token)
                .header("idempotency-key", "late-shot")
                .json(&json!({"cell": "E5"})),
        )
    };
    let refused = late().await;
    assert_eq!(
        (refused.status, refused.code()),
        (StatusCode::CONFLICT, "wrong_phase")
    );
    let retried = late().await;
    assert_eq!(
        retried.code(),
        "wrong_phase",
        "the key was given back, not left in progress"
    );
    let after = app
        .get(&format!("/v1/matches/{id}"), Some(&ala.token))
        .await;
    assert_eq!(after.body["phase"], "finished");
    assert_eq!(
        after.body["result"],
        json!({"winner": other.id, "reason": "shot_timeout"})
    );
    let shots: i64 =
        sqlx::query_scalar("SELECT count(*) FROM match_events WHERE kind = 'shot_fired'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(shots, 0, "the late shot was not stored");
}

/// A replica decides a command from the state its own last command stored, without the
/// lock round trip. When another replica moved the match on meanwhile and word of it has
/// not arrived (here: a replica that hears none, as during a listener outage), the command
/// is decided again under the row lock, never answered from the stale state, whether the
/// stale state would accept a shot out of turn or refuse one in turn.
#[sqlx::test]
async fn a_replica_never_answers_from_a_state_another_replica_moved_on(pool: PgPool) {
    use statki::app::{Answer, AppError};
    use statki::engine::{Cell, Refusal};
    use std::str::FromStr;

    let one = spawn_app(pool.clone()).await;
    let deaf = statki::app::App::new(
        pool,
        common::standard_settings(),
        statki::auth::Tokens::new(common::SECRET).unwrap(),
    );
    let (id, shooter, target) = one.battle_match("statki").await;
    let match_id: uuid::Uuid = id.parse().unwrap();
    let shooter_id: uuid::Uuid = shooter.id.parse().unwrap();
    let target_id: uuid::Uuid = target.id.parse().unwrap();
    let on_deaf = |player: uuid::Uuid, cell: &str| {
        deaf.fire(match_id, player, Cell::from_str(cell).unwrap(), None)
    };
    let on_one = |player: &Player, cell: &str| {
        one.post(
            &format!("/v1/matches/{id}/shots"),
            &player.token,
            json!({"cell": cell}),
        )
    };

    assert!(matches!(
        on_deaf(shooter_id, "J1").await,
        Ok(Answer::Fresh(_))
    ));
    let reply = on_one(&target, "J1").await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    // The deaf replica last stored the target on turn; it is the shooter's turn now.
    let before = one.event_count().await;
    let refused = on_deaf(target_id, "J2").await;
    assert!(
        matches!(refused, Err(AppError::Rule(Refusal::NotYourTurn))),
        "{refused:?}"
    );
    assert_eq!(
        one.event_count().await,
        before,
        "the refusal stored nothing"
    );
    assert!(matches!(
        on_deaf(shooter_id, "J2").await,
        Ok(Answer::Fresh(_))
    ));
    let reply = on_one(&target, "J3").await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    // The deaf replica last stored the target on turn again; it is the shooter's turn.
    let last = on_deaf(shooter_id, "J3").await;
    let Ok(Answer::Fresh(last)) = last else {
        panic!("the shot in turn was refused: {last:?}");
    };

    let log = one
        .get(&format!("/v1/matches/{id}/events"), Some(&shooter.token))
        .await;
    let shots: Vec<(i64, String)> = log
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["kind"] == "shot_fired")
        .map(|event| {
            (
                event["seq"].as_i64().unwrap(),
                event["cell"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let cells: Vec<&str> = shots.iter().map(|(_, cell)| cell.as_str()).collect();
    assert_eq!(cells, ["J1", "J1", "J2", "J3", "J3"]);
    assert!(
        shots.windows(2).all(|pair| pair[1].0 == pair[0].0 + 1),
        "{shots:?}"
    );
    assert_eq!(Some(last.seq), shots.last().map(|shot| shot.0));
}

#[sqlx::test]
async fn players_react_and_refused_reactions_store_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let waiting = app.create_match(&ala, json!({})).await;
    let react = |id: &str, player: &Player, reaction: &str| {
        app.post(
            &format!("/v1/matches/{id}/reactions"),
            &player.token,
            json!({ "reaction": reaction }),
        )
    };
    assert_refused(
        &app,
        react(&waiting, &ala, "good_luck"),
        StatusCode::CONFLICT,
        "wrong_phase",
    )
    .await;

    let (id, first, second) = app.battle_match("statki").await;
    let before = app
        .get(&format!("/v1/matches/{id}"), Some(&first.token))
        .await;
    let reacted = react(&id, &second, "good_luck").await;
    assert_eq!(reacted.status, StatusCode::OK, "{:?}", reacted.body);
    assert_eq!(reacted.body["you"], second.id.as_str());
    // Nothing of the game moved: the turn and its clock are as they were.
    assert_eq!(reacted.body["turn"], before.body["turn"]);
    assert_eq!(reacted.body["deadline"], before.body["deadline"]);
    let events = app
        .get(&format!("/v1/matches/{id}/events"), Some(&first.token))
        .await;
    let last = events.body.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "reaction");
    assert_eq!(last["player"], second.id.as_str());
    assert_eq!(last["reaction"], "good_luck");
    assert!(last["next_at"].is_string());

    let lolek = app.register("Lolek").await;
    assert_refused(
        &app,
        react(&id, &lolek, "nice_shot"),
        StatusCode::FORBIDDEN,
        "not_a_player",
    )
    .await;
    assert_refused(
        &app,
        react(&id, &first, "free text"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_body",
    )
    .await;
    // The gap: refused with the seconds to wait, and nothing stored.
    let count = app.event_count().await;
    let too_soon = app
        .client
        .post(app.url(&format!("/v1/matches/{id}/reactions")))
        .bearer_auth(&second.token)
        .json(&json!({"reaction": "oops"}))
        .send()
        .await
        .unwrap();
    assert_eq!(too_soon.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = too_soon
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=3).contains(&wait), "{wait}");
    let problem: Value = too_soon.json().await.unwrap();
    assert_eq!(problem["code"], "too_many_reactions");
    assert_eq!(app.event_count().await, count);
    // The opponent's gap is their own.
    let answer = react(&id, &first, "thanks").await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);

    // After the end, no more reactions.
    app.post(&format!("/v1/matches/{id}/resign"), &first.token, json!({}))
        .await;
    assert_refused(
        &app,
        react(&id, &second, "good_game"),
        StatusCode::CONFLICT,
        "wrong_phase",
    )
    .await;
}

#[sqlx::test]
async fn a_reaction_retried_with_its_key_is_stored_once(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, _) = app.placement_match("classic").await;
    let react = |key: &str, reaction: &str| {
        app.send(
            app.client
                .post(app.url(&format!("/v1/matches/{id}/reactions")))
                .bearer_auth(&first.token)
                .header("idempotency-key", key)
                .json(&json!({ "reaction": reaction })),
        )
    };
    let answer = react("gl-1", "good_luck").await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let count = app.event_count().await;
    // Within the 3 s gap a fresh reaction would be refused; the retry answers the first.
    let retry = react("gl-1", "good_luck").await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.body, answer.body);
    assert_eq!(app.event_count().await, count);
    let other = react("gl-1", "oops").await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
    assert_eq!(app.event_count().await, count);
}
