//! Exports: a finished match as one JSON document or one line per move, and a player's
//! finished matches as ndjson, newest first, with `since`, `until` and `max`.

use crate::common;
use crate::ladder_support::play_out;

use common::{Player, TestApp, spawn_app};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

/// A match `winner` wins by sinking every ship; returns its id.
async fn finished_match(app: &TestApp, ruleset: &str) -> (String, Player, Player) {
    let (id, first, second) = app.battle_match(ruleset).await;
    play_out(app, &id, &first, &second, ruleset).await;
    (id, first, second)
}

async fn export_text(app: &TestApp, id: &str, token: &str, accept: &str) -> reqwest::Response {
    app.client
        .get(app.url(&format!("/v1/matches/{id}/export")))
        .bearer_auth(token)
        .header("accept", accept)
        .send()
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_finished_match_exports_whole_to_any_caller(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, winner, loser) = finished_match(&app, "statki").await;
    let outsider = app.register("outsider").await;

    let export = app
        .get(&format!("/v1/matches/{id}/export"), Some(&outsider.token))
        .await;
    assert_eq!(export.status, StatusCode::OK, "{:?}", export.body);
    assert!(export.content_type.starts_with("application/json"));
    let body = &export.body;
    assert_eq!(body["id"], id);
    assert_eq!(body["ruleset"], "statki");
    assert_eq!(body["phase"], "finished");
    assert_eq!(
        body["result"],
        json!({"winner": winner.id, "reason": "all_sunk"})
    );
    assert_eq!(body["names"][&winner.id], winner.name);
    assert_eq!(body["names"][&loser.id], loser.name);
    let fleets = body["fleets"].as_array().unwrap();
    assert_eq!(fleets.len(), 2);
    assert!(
        fleets
            .iter()
            .all(|fleet| fleet["commitment_verified"] == true)
    );

    // Every event of the log, unredacted, in order: the same as the events page.
    let page = app
        .get(&format!("/v1/matches/{id}/events"), Some(&winner.token))
        .await;
    let exported: Vec<&Value> = body["events"].as_array().unwrap().iter().collect();
    let logged: Vec<&Value> = page.body.as_array().unwrap().iter().collect();
    assert_eq!(exported.len(), logged.len());
    let seqs: Vec<i64> = exported
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert_eq!(
        exported.last().unwrap()["kind"],
        "match_finished",
        "{:?}",
        exported.last()
    );
    let shots = exported
        .iter()
        .filter(|e| e["kind"] == "shot_fired")
        .count();
    assert!(shots > 17, "{shots}");
}

#[sqlx::test]
async fn the_text_form_is_one_line_per_move(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, winner, loser) = finished_match(&app, "statki").await;
    let json_export = app
        .get(&format!("/v1/matches/{id}/export"), Some(&loser.token))
        .await;

    let response = export_text(&app, &id, &loser.token, "text/plain").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!("# statki match {id} statki unranked created ")),
        "{}",
        lines[0]
    );
    // The creator is A; the winner fired first in `battle_match`.
    let seat = |player: &Player| {
        if json_export.body["players"][0] == player.id.as_str() {
            "A"
        } else {
            "B"
        }
    };
    assert!(lines.contains(&format!("# {} {} {}", seat(&winner), winner.id, winner.name).as_str()));
    let fleet_lines: Vec<&&str> = lines.iter().filter(|l| l.starts_with("# fleet ")).collect();
    assert_eq!(fleet_lines.len(), 2);
    assert!(fleet_lines.iter().all(|line| line.ends_with(" verified")));
    assert!(
        fleet_lines[0].contains(" A1H,A3H,A5H,A7H,A9H salt "),
        "{}",
        fleet_lines[0]
    );

    let moves: Vec<&&str> = lines.iter().filter(|l| !l.starts_with('#')).collect();
    let w = seat(&winner);
    assert!(
        moves.contains(
            &&format!("{} {w} first", seq_of(&json_export.body, "battle_started")).as_str()
        )
    );
    assert!(
        moves
            .iter()
            .any(|line| line.ends_with(&format!("{w} A1 hit")))
    );
    assert!(
        moves
            .iter()
            .any(|line| line.ends_with(&format!("{w} E1 sunk Carrier")))
    );
    assert!(
        moves
            .iter()
            .any(|line| line.contains(&format!(" {w} B9 sunk "))),
        "{text}"
    );
    assert_eq!(
        *moves.last().unwrap(),
        &format!(
            "{} {w} wins all_sunk",
            seq_of(&json_export.body, "match_finished")
        )
    );
    // Every move line starts with its event's sequence number, ascending.
    let seqs: Vec<i64> = moves
        .iter()
        .map(|line| line.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");

    // JSON when JSON is accepted too; text only when asked for alone.
    let both = export_text(&app, &id, &loser.token, "application/json, text/plain").await;
    assert!(
        both.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
}

fn seq_of(export: &Value, kind: &str) -> i64 {
    export["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == kind)
        .and_then(|e| e["seq"].as_i64())
        .unwrap()
}

#[sqlx::test]
async fn a_match_in_play_is_not_exported(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, _) = app.battle_match("classic").await;
    let refused = app
        .get(&format!("/v1/matches/{id}/export"), Some(&shooter.token))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.code(), "match_not_over");
    assert_eq!(refused.content_type, "application/problem+json");

    let missing = app
        .get(
            &format!("/v1/matches/{}/export", uuid::Uuid::new_v4()),
            Some(&shooter.token),
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let anonymous = app.get(&format!("/v1/matches/{id}/export"), None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn an_export_is_tagged_and_revalidated(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, winner, _) = finished_match(&app, "battaglia").await;
    let path = app.url(&format!("/v1/matches/{id}/export"));
    let first = app
        .client
        .get(&path)
        .bearer_auth(&winner.token)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["cache-control"], "private, no-cache");
    let tag = first.headers()["etag"].to_str().unwrap().to_owned();
    let again = app
        .client
        .get(&path)
        .bearer_auth(&winner.token)
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // The text form is another representation, with a tag of its own.
    let text = app
        .client
        .get(&path)
        .bearer_auth(&winner.token)
        .header("accept", "text/plain")
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), StatusCode::OK);
    assert_ne!(text.headers()["etag"].to_str().unwrap(), tag);
}

/// The ids of an ndjson export, in the order sent.
async fn exported_ids(app: &TestApp, player: &Player, query: &str) -> Vec<String> {
    let response = app
        .client
        .get(app.url(&format!("/v1/players/{}/matches/export{query}", player.id)))
        .bearer_auth(&player.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{query}");
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    // Compressed, the same lines, and the stream ends cleanly.
    let gzipped = app
        .client
        .get(app.url(&format!("/v1/players/{}/matches/export{query}", player.id)))
        .bearer_auth(&player.token)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.headers()["content-encoding"], "gzip");
    let packed = gzipped.bytes().await.unwrap();
    assert_eq!(common::gunzip(&packed), text, "{query}");
    assert!(text.is_empty() || text.ends_with('\n'));
    text.lines()
        .map(|line| {
            let export: Value = serde_json::from_str(line).unwrap();
            assert_eq!(export["phase"], "finished");
            assert_eq!(export["fleets"].as_array().unwrap().len(), 2);
            export["id"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[sqlx::test]
async fn a_players_matches_stream_newest_first_within_bounds(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("ala").await;
    let mut finished = Vec::new();
    let mut created_at = Vec::new();
    for _ in 0..3 {
        let opponent = app.register(&common::unique("rival")).await;
        let id = app.create_match(&ala, json!({ "ruleset": "statki" })).await;
        let joined = app
            .post(
                &format!("/v1/matches/{id}/join"),
                &opponent.token,
                json!({}),
            )
            .await;
        assert_eq!(joined.status, StatusCode::OK);
        for player in [&ala, &opponent] {
            let placed = app
                .put(
                    &format!("/v1/matches/{id}/fleet"),
                    &player.token,
                    common::legal_fleet("statki"),
                )
                .await;
            assert_eq!(placed.status, StatusCode::OK);
        }
        let resigned = app
            .post(
                &format!("/v1/matches/{id}/resign"),
                &opponent.token,
                json!({}),
            )
            .await;
        assert_eq!(resigned.status, StatusCode::OK);
        let view = app
            .get(&format!("/v1/matches/{id}"), Some(&ala.token))
            .await;
        created_at.push(view.body["created_at"].as_str().unwrap().to_owned());
        finished.push(id);
    }
    // A match in play and a declined challenge are not exported.
    let rival = app.register("rival").await;
    let in_play = app.create_match(&ala, json!({ "ruleset": "statki" })).await;
    let joined = app
        .post(
            &format!("/v1/matches/{in_play}/join"),
            &rival.token,
            json!({}),
        )
        .await;
    assert_eq!(joined.status, StatusCode::OK);
    let declined = app
        .create_match(&ala, json!({ "opponent": rival.id }))
        .await;
    let decline = app
        .post(
            &format!("/v1/matches/{declined}/decline"),
            &rival.token,
            json!({}),
        )
        .await;
    assert_eq!(decline.status, StatusCode::OK, "{:?}", decline.body);

    let newest_first: Vec<String> = finished.iter().rev().cloned().collect();
    let all = exported_ids(&app, &ala, "").await;
    assert_eq!(all, newest_first);
    assert!(!all.contains(&in_play) && !all.contains(&declined));

    assert_eq!(exported_ids(&app, &ala, "?max=2").await, newest_first[..2]);
    let encode = |at: &str| at.replace('+', "%2B").replace(':', "%3A");
    // `since` is inclusive, `until` exclusive: a second export continues the first.
    let since = format!("?since={}", encode(&created_at[1]));
    assert_eq!(exported_ids(&app, &ala, &since).await, newest_first[..2]);
    let until = format!("?until={}", encode(&created_at[1]));
    assert_eq!(
        exported_ids(&app, &ala, &until).await,
        [finished[0].clone()]
    );
    let between = format!(
        "?since={}&until={}",
        encode(&created_at[0]),
        encode(&created_at[2])
    );
    assert_eq!(exported_ids(&app, &ala, &between).await, newest_first[1..]);
    assert!(exported_ids(&app, &rival, "").await.is_empty());
    // An empty window holds nothing.
    let backwards = format!(
        "?since={}&until={}",
        encode(&created_at[2]),
        encode(&created_at[0])
    );
    assert!(exported_ids(&app, &ala, &backwards).await.is_empty());
}

#[sqlx::test]
async fn a_players_export_refuses_bad_bounds(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("ala").await;
    let path = |query: &str| format!("/v1/players/{}/matches/export{query}", ala.id);
    for query in ["?max=0", "?max=1001", "?since=yesterday", "?limit=5"] {
        let refused = app.get(&path(query), Some(&ala.token)).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(refused.code(), "invalid_query", "{query}");
    }
    let nobody = app
        .get(
            &format!("/v1/players/{}/matches/export", uuid::Uuid::new_v4()),
            Some(&ala.token),
        )
        .await;
    assert_eq!(nobody.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(&path(""), None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[sqlx::test]
async fn a_reaction_is_a_move_line_of_its_own(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, second) = app.battle_match("statki").await;
    let reacted = app
        .post(
            &format!("/v1/matches/{id}/reactions"),
            &second.token,
            json!({"reaction": "nice_shot"}),
        )
        .await;
    assert_eq!(reacted.status, StatusCode::OK, "{:?}", reacted.body);
    let seq = reacted.body["seq"].as_i64().unwrap();
    app.post(&format!("/v1/matches/{id}/resign"), &first.token, json!({}))
        .await;
    let json_export = app
        .get(&format!("/v1/matches/{id}/export"), Some(&first.token))
        .await;
    assert_eq!(seq_of(&json_export.body, "reaction"), seq);
    let seat = if json_export.body["players"][0] == second.id.as_str() {
        "A"
    } else {
        "B"
    };
    let text = export_text(&app, &id, &first.token, "text/plain")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        text.lines()
            .any(|line| line == format!("{seq} {seat} reacts nice_shot")),
        "{text}"
    );
}

#[sqlx::test]
async fn single_ship_moves_are_capped_so_an_export_stays_within_its_stated_size(pool: PgPool) {
    use statki::engine::game::{MATCH_EVENTS_MAX, PLACEMENT_MOVES_PER_PLAYER};
    let app = spawn_app(pool).await;
    let (id, ala, bolek) = app.placement_match("statki").await;
    let ship = format!("/v1/matches/{id}/ships/0");
    let mut moves = 0;
    while moves < PLACEMENT_MOVES_PER_PLAYER {
        let placed = app
            .put(
                &ship,
                &ala.token,
                json!({"cell": "A1", "orientation": "horizontal"}),
            )
            .await;
        assert_eq!(placed.status, StatusCode::OK, "{:?}", placed.body);
        let removed = app.delete(&ship, &ala.token).await;
        assert_eq!(removed.status, StatusCode::OK, "{:?}", removed.body);
        moves += 2;
    }
    let events_before = app.event_count().await;
    let refused = app
        .put(
            &ship,
            &ala.token,
            json!({"cell": "A1", "orientation": "horizontal"}),
        )
        .await;
    assert_eq!(
        (refused.status, refused.code()),
        (StatusCode::CONFLICT, "too_many_placement_moves"),
        "{:?}",
        refused.body
    );
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("/fleet"),
        "the refusal says how to go on: {:?}",
        refused.body
    );
    assert_eq!(
        app.event_count().await,
        events_before,
        "a refusal records nothing"
    );
    // The other player is not held back, and the whole fleet can still be placed at once.
    let theirs = app
        .put(
            &ship,
            &bolek.token,
            json!({"cell": "A1", "orientation": "horizontal"}),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::OK, "{:?}", theirs.body);
    for player in [&ala, &bolek] {
        let fleet = app
            .put(
                &format!("/v1/matches/{id}/fleet"),
                &player.token,
                common::legal_fleet("statki"),
            )
            .await;
        assert_eq!(fleet.status, StatusCode::OK, "{:?}", fleet.body);
    }
    let resigned = app
        .post(&format!("/v1/matches/{id}/resign"), &ala.token, json!({}))
        .await;
    assert_eq!(resigned.status, StatusCode::OK, "{:?}", resigned.body);

    let export = app
        .get(&format!("/v1/matches/{id}/export"), Some(&bolek.token))
        .await;
    assert_eq!(export.status, StatusCode::OK, "{:?}", export.body);
    let events = export.body["events"].as_array().expect("events").len();
    let document = serde_json::to_value(statki::http::openapi()).expect("the document");
    let stated =
        document["components"]["schemas"]["MatchExport"]["properties"]["events"]["maxItems"]
            .as_u64()
            .expect("MatchExport.events states its maximum");
    assert_eq!(
        stated, MATCH_EVENTS_MAX as u64,
        "the document states the real maximum"
    );
    assert!(events <= MATCH_EVENTS_MAX, "{events} events");
    assert!(
        events > PLACEMENT_MOVES_PER_PLAYER as usize,
        "the single moves are all in the log: {events} events"
    );
}
