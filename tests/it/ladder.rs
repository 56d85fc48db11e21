//! The ranked ladder: Glicko-2 updates in the finishing transaction, what counts and what
//! does not, the ladder and profile resources, and the no-self-play rule.

use crate::common;
use crate::ladder_support;

use common::{Player, TestApp, spawn_app, unique};
use ladder_support::{
    clock_ahead, events, place, play_out, ranked, ranked_all_sunk, resign, started,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use skillratings::Outcomes;
use skillratings::glicko2::{Glicko2Config, Glicko2Rating, glicko2};
use sqlx::PgPool;

fn glicko(value: &Value) -> Glicko2Rating {
    Glicko2Rating {
        rating: value["rating"].as_f64().unwrap(),
        deviation: value["deviation"].as_f64().unwrap(),
        volatility: value["volatility"].as_f64().unwrap(),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

async fn ladder(app: &TestApp, path: &str) -> Value {
    let reply = app.get(path, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

fn entry<'a>(page: &'a Value, player: &Player) -> &'a Value {
    page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["player_id"] == player.id.as_str())
        .unwrap_or_else(|| panic!("{} is not on the ladder: {page}", player.name))
}

async fn profile_ladder(app: &TestApp, player: &Player, ruleset: &str) -> Value {
    let reply = app.get(&format!("/v1/players/{}", player.id), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body["ladders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|ladder| ladder["ruleset"] == ruleset)
        .cloned()
        .unwrap()
}

async fn two(app: &TestApp) -> (Player, Player) {
    (
        app.register(&unique("ala")).await,
        app.register(&unique("bolek")).await,
    )
}

async fn rating_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM rating_changes")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_ranked_win_moves_both_ratings_exactly_as_glicko2_does(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (a, b) = two(&app).await;
    let id = ranked_all_sunk(&app, &a, &b, &a, "statki").await;

    // The result and the rating change are in the same log, in that order.
    let log = events(&app, &id, &b).await;
    let kinds: Vec<&str> = log.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        &kinds[kinds.len() - 2..],
        ["match_finished", "rating_updated"]
    );
    let update = log.last().unwrap();
    assert_eq!(update["ruleset"], "statki");

    let (winner, loser) = glicko2(
        &Glicko2Rating::new(),
        &Glicko2Rating::new(),
        &Outcomes::WIN,
        &Glicko2Config::new(),
    );
    let changes = update["changes"].as_array().unwrap();
    let change = |player: &Player| {
        changes
            .iter()
            .find(|c| c["player"] == player.id.as_str())
            .unwrap()
            .clone()
    };
    let (ca, cb) = (change(&a), change(&b));
    assert_eq!(
        (ca["score"].as_str(), cb["score"].as_str()),
        (Some("win"), Some("loss"))
    );
    assert_eq!(glicko(&ca["before"]), Glicko2Rating::new());
    // JSON may lose the last bit of a float; the numbers are otherwise the crate's own.
    for (got, want) in [
        (glicko(&ca["after"]), winner),
        (glicko(&cb["after"]), loser),
    ] {
        assert!(close(got.rating, want.rating), "{got:?} {want:?}");
        assert!(close(got.deviation, want.deviation), "{got:?} {want:?}");
        assert!(close(got.volatility, want.volatility), "{got:?} {want:?}");
    }
    assert!(winner.rating > 1500.0 && loser.rating < 1500.0);

    let page = ladder(&app, "/v1/ladder/statki").await;
    assert_eq!(page["entries"].as_array().unwrap().len(), 2);
    let (ea, eb) = (entry(&page, &a), entry(&page, &b));
    assert_eq!(ea["rank"], 1);
    assert_eq!(eb["rank"], 2);
    assert!(close(ea["rating"].as_f64().unwrap(), winner.rating));
    assert!(close(eb["deviation"].as_f64().unwrap(), loser.deviation));
    assert_eq!(
        (
            ea["games"].as_i64(),
            ea["wins"].as_i64(),
            ea["losses"].as_i64()
        ),
        (Some(1), Some(1), Some(0))
    );
    assert_eq!(
        (
            eb["wins"].as_i64(),
            eb["losses"].as_i64(),
            eb["draws"].as_i64()
        ),
        (Some(0), Some(1), Some(0))
    );
    assert_eq!(
        ea["provisional"], true,
        "one game leaves the deviation near 290"
    );
    assert_eq!(ea["name"], a.name.as_str());

    // Other ladders are untouched.
    assert!(
        ladder(&app, "/v1/ladder/classic").await["entries"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // The profile keeps the overall record and adds each ladder.
    let profile = app.get(&format!("/v1/players/{}", a.id), None).await.body;
    assert_eq!(
        (profile["wins"].as_i64(), profile["losses"].as_i64()),
        (Some(1), Some(0))
    );
    let ladders = profile["ladders"].as_array().unwrap();
    assert_eq!(ladders.len(), 3);
    let statki = profile_ladder(&app, &a, "statki").await;
    assert_eq!(statki["rank"], 1);
    assert!(close(statki["rating"].as_f64().unwrap(), winner.rating));
    assert_eq!(
        (
            statki["wins"].as_i64(),
            statki["losses"].as_i64(),
            statki["draws"].as_i64()
        ),
        (Some(1), Some(0), Some(0))
    );
    let classic = profile_ladder(&app, &a, "classic").await;
    assert_eq!(
        (classic["rating"].as_f64(), classic["games"].as_i64()),
        (Some(1500.0), Some(0))
    );
    assert!(classic["rank"].is_null());
    assert_eq!(classic["provisional"], true);

    // The history table and its view copy the event.
    assert_eq!(rating_rows(&app.pool).await, 2);
    let (after, game): (f64, i32) =
        sqlx::query_as("SELECT rating_after, game FROM rating_history WHERE player_id = $1::uuid")
            .bind(&a.id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(close(after, winner.rating));
    assert_eq!(game, 1);
}

#[sqlx::test]
async fn the_next_game_starts_from_the_last_rating_and_a_loss_lowers_it(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (a, b) = two(&app).await;
    let first = ranked(&app, &a, &b, "statki").await;
    resign(&app, &first, &b).await; // resigning counts: a wins
    let second = ranked(&app, &b, &a, "statki").await;
    resign(&app, &second, &b).await; // b loses again

    let log = events(&app, &second, &a).await;
    let update = log.last().unwrap();
    assert_eq!(update["kind"], "rating_updated");
    let changes = update["changes"].as_array().unwrap();
    let change = |player: &Player| {
        changes
            .iter()
            .find(|c| c["player"] == player.id.as_str())
            .unwrap()
            .clone()
    };
    let (ca, cb) = (change(&a), change(&b));
    let (a1, b1) = glicko2(
        &Glicko2Rating::new(),
        &Glicko2Rating::new(),
        &Outcomes::WIN,
        &Glicko2Config::new(),
    );
    // Each game starts from the rating the previous one ended with.
    assert!(close(glicko(&ca["before"]).rating, a1.rating));
    assert!(close(glicko(&cb["before"]).rating, b1.rating));
    let (b2, a2) = glicko2(
        &glicko(&cb["before"]),
        &glicko(&ca["before"]),
        &Outcomes::LOSS,
        &Glicko2Config::new(),
    );
    assert!(close(glicko(&ca["after"]).rating, a2.rating));
    assert!(close(glicko(&cb["after"]).rating, b2.rating));
    assert!(a2.rating > a1.rating && b2.rating < b1.rating);
    // An expected win moves less than the upset-free first game did.
    assert!(a2.rating - a1.rating < a1.rating - 1500.0);
    assert_eq!(
        (ca["game"].as_i64(), cb["game"].as_i64()),
        (Some(2), Some(2))
    );

    let page = ladder(&app, "/v1/ladder/statki").await;
    let ea = entry(&page, &a);
    assert_eq!(
        (ea["games"].as_i64(), ea["wins"].as_i64()),
        (Some(2), Some(2))
    );
    assert!(close(ea["rating"].as_f64().unwrap(), a2.rating));
}

#[sqlx::test]
async fn a_ranked_double_placement_timeout_is_a_rated_draw(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (a, b) = two(&app).await;
    let id = ranked(&app, &a, &b, "classic").await;
    assert_eq!(clock_ahead(&app, 121).await, 1);

    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&a.token))
        .await
        .body;
    assert_eq!(view["result"]["reason"], "both_placement_timeout");
    assert!(view["result"]["winner"].is_null());
    let (x, y) = glicko2(
        &Glicko2Rating::new(),
        &Glicko2Rating::new(),
        &Outcomes::DRAW,
        &Glicko2Config::new(),
    );
    let page = ladder(&app, "/v1/ladder/classic").await;
    for (player, expected) in [(&a, x), (&b, y)] {
        let e = entry(&page, player);
        assert!(close(e["rating"].as_f64().unwrap(), expected.rating));
        assert!(close(e["deviation"].as_f64().unwrap(), expected.deviation));
        assert!(
            e["deviation"].as_f64().unwrap() < 350.0,
            "a draw is still information"
        );
        assert_eq!(
            (
                e["games"].as_i64(),
                e["draws"].as_i64(),
                e["wins"].as_i64(),
                e["losses"].as_i64()
            ),
            (Some(1), Some(1), Some(0), Some(0))
        );
        // Equal ratings share the rank.
        assert_eq!(e["rank"], 1);
    }
    let log = events(&app, &id, &a).await;
    let update = log.last().unwrap();
    assert_eq!(update["kind"], "rating_updated");
    assert!(
        update["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["score"] == "draw")
    );
}

#[sqlx::test]
async fn placement_and_shot_timeouts_are_rated_wins_and_losses(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (a, b) = two(&app).await;
    // Only b places: a loses on the placement clock.
    let first = ranked(&app, &a, &b, "battaglia").await;
    place(&app, &first, &b, "battaglia").await;
    assert_eq!(clock_ahead(&app, 121).await, 1);
    // Both place, nobody shoots: whoever is on turn loses on the shot clock.
    let second = ranked(&app, &a, &b, "battaglia").await;
    place(&app, &second, &a, "battaglia").await;
    place(&app, &second, &b, "battaglia").await;
    let turn = app
        .get(&format!("/v1/matches/{second}"), Some(&a.token))
        .await
        .body["turn"]
        .clone();
    assert_eq!(clock_ahead(&app, 31).await, 1);

    let reasons: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT reason, winner::text FROM matches WHERE id = ANY($1::uuid[]) ORDER BY created_at",
    )
    .bind(vec![first.clone(), second.clone()])
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(reasons[0], ("placement_timeout".into(), Some(b.id.clone())));
    assert_eq!(reasons[1].0, "shot_timeout");
    assert_ne!(reasons[1].1.as_deref(), turn.as_str());

    let page = ladder(&app, "/v1/ladder/battaglia").await;
    let (ea, eb) = (entry(&page, &a), entry(&page, &b));
    assert_eq!(
        (ea["games"].as_i64(), eb["games"].as_i64()),
        (Some(2), Some(2))
    );
    assert_eq!(
        ea["wins"].as_i64().unwrap() + eb["wins"].as_i64().unwrap(),
        2
    );
    assert!(
        eb["wins"].as_i64().unwrap() >= 1,
        "b won on the placement clock"
    );
    assert_eq!(rating_rows(&app.pool).await, 4);
}

#[sqlx::test]
async fn unranked_and_cancelled_matches_change_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (a, b) = two(&app).await;
    // Unranked, played to the end.
    let casual = started(&app, &a, &b, json!({ "ruleset": "statki" })).await;
    place(&app, &casual, &a, "statki").await;
    place(&app, &casual, &b, "statki").await;
    play_out(&app, &casual, &a, &b, "statki").await;
    // Unranked, resigned and timed out.
    let resigned = started(
        &app,
        &a,
        &b,
        json!({ "ruleset": "statki", "ranked": false }),
    )
    .await;
    resign(&app, &resigned, &a).await;
    started(&app, &a, &b, json!({ "ruleset": "classic" })).await;
    clock_ahead(&app, 121).await;
    // Ranked but cancelled: withdrawn, and never joined.
    let withdrawn = app.create_match(&a, json!({ "ranked": true })).await;
    resign(&app, &withdrawn, &a).await;
    app.create_match(&b, json!({ "ranked": true, "ruleset": "classic" }))
        .await;
    clock_ahead(&app, 901).await;

    let phases: Vec<String> = sqlx::query_scalar("SELECT phase FROM matches ORDER BY created_at")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        phases,
        ["finished", "finished", "finished", "cancelled", "cancelled"]
    );
    assert_eq!(rating_rows(&app.pool).await, 0);
    let kinds: i64 =
        sqlx::query_scalar("SELECT count(*) FROM match_events WHERE kind = 'rating_updated'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(kinds, 0);
    for ruleset in ["statki", "classic", "battaglia"] {
        let page = ladder(&app, &format!("/v1/ladder/{ruleset}")).await;
        assert!(page["entries"].as_array().unwrap().is_empty(), "{page}");
    }
    let statki = profile_ladder(&app, &a, "statki").await;
    assert_eq!(statki["games"], 0);
    // The overall record still counts the unranked games.
    let profile = app.get(&format!("/v1/players/{}", a.id), None).await.body;
    assert_eq!(
        profile["wins"].as_i64().unwrap()
            + profile["losses"].as_i64().unwrap()
            + profile["draws"].as_i64().unwrap(),
        3
    );
}

#[sqlx::test]
async fn a_player_can_never_play_themselves(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("solo")).await;
    let id = app.create_match(&a, json!({ "ranked": true })).await;
    let before = app.event_count().await;
    let reply = app
        .post(&format!("/v1/matches/{id}/join"), &a.token, json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert_eq!(reply.code(), "own_match");
    let challenge = app
        .post(
            "/v1/matches",
            &a.token,
            json!({ "ranked": true, "opponent": a.id }),
        )
        .await;
    assert_eq!(challenge.status, StatusCode::CONFLICT);
    assert_eq!(challenge.code(), "own_match");
    assert_eq!(app.event_count().await, before, "refusals store nothing");
    assert!(
        ladder(&app, "/v1/ladder/statki").await["entries"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[sqlx::test]
async fn ranked_matches_take_only_the_standard_rules_and_clock(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    for body in [
        json!({ "ranked": true, "ruleset": "battaglia", "options": { "extra_shot_on_hit": true } }),
        json!({ "ranked": true, "clock": { "placement_seconds": 60, "shot_seconds": 10 } }),
    ] {
        let reply = app.post("/v1/matches", &a.token, body).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(reply.code(), "ranked_needs_standard_rules");
    }
}

/// One game of a player's rating history.
#[derive(Debug, sqlx::FromRow)]
struct Link {
    game: i32,
    #[sqlx(rename = "rating_before")]
    before: f64,
    #[sqlx(rename = "rating_after")]
    after: f64,
    at: chrono::DateTime<chrono::Utc>,
}

/// `player`'s rating history on every ladder, in game order.
async fn rating_chain(pool: &PgPool, player: &Player) -> Vec<Link> {
    sqlx::query_as(
        "SELECT game, rating_before, rating_after, at FROM rating_changes
         WHERE player_id = $1::uuid ORDER BY game",
    )
    .bind(&player.id)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn concurrent_finishes_of_one_player_chain_their_ratings(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let c = app.register(&unique("celina")).await;
    let with_b = ranked(&app, &a, &b, "statki").await;
    let with_c = ranked(&app, &c, &a, "statki").await;
    let (path_b, path_c) = (
        format!("/v1/matches/{with_b}/resign"),
        format!("/v1/matches/{with_c}/resign"),
    );
    let (x, y) = tokio::join!(
        app.post(&path_b, &b.token, json!({})),
        app.post(&path_c, &c.token, json!({})),
    );
    assert_eq!((x.status, y.status), (StatusCode::OK, StatusCode::OK));
    let chain = rating_chain(&app.pool, &a).await;
    assert_eq!(chain.len(), 2);
    assert_eq!((chain[0].game, chain[1].game), (1, 2));
    assert_eq!(chain[0].before, 1500.0);
    assert_eq!(
        chain[1].before, chain[0].after,
        "the second game starts where the first ended"
    );
    let report = statki::verify::run(&app.pool).await.unwrap();
    assert!(report.ok(), "{report}");
}

#[sqlx::test]
async fn one_players_finishes_in_one_batch_chain_their_ratings(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    // Six ranked matches of Ala's, resigned by their opponents all at once while the
    // lanes' writes wait on a lock: each of the two lanes then takes its waiting commands
    // as one batch, so at least two of Ala's results are stored in one transaction.
    let mut resigns = Vec::new();
    for _ in 0..6 {
        let opponent = app.register(&unique("rywal")).await;
        let id = ranked(&app, &a, &opponent, "statki").await;
        resigns.push((format!("/v1/matches/{id}/resign"), opponent));
    }
    let mut blocker = app.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE matches IN EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let replies = resigns
        .iter()
        .map(|(path, opponent)| app.post(path, &opponent.token, json!({})));
    let released = async {
        // The commands reach the lanes' queues while the first batches wait on the lock.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        blocker.rollback().await.unwrap();
    };
    let (replies, ()) = tokio::join!(futures::future::join_all(replies), released);
    for reply in &replies {
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    }
    let chain = rating_chain(&app.pool, &a).await;
    let games: Vec<i32> = chain.iter().map(|link| link.game).collect();
    assert_eq!(games, [1, 2, 3, 4, 5, 6]);
    for pair in chain.windows(2) {
        assert_eq!(
            pair[1].before, pair[0].after,
            "game {} starts where the one before ended",
            pair[1].game
        );
    }
    // The premise: some results shared a transaction (its one time).
    let times: std::collections::HashSet<_> = chain.iter().map(|link| link.at).collect();
    assert!(
        times.len() < chain.len(),
        "no two of Ala's results were stored in one batch: {chain:?}"
    );
    let profile = app.get(&format!("/v1/players/{}", a.id), None).await.body;
    assert_eq!(profile["wins"], 6);
    let report = statki::verify::run(&app.pool).await.unwrap();
    assert!(report.ok(), "{report}");
}

#[sqlx::test]
async fn the_ladder_pages_best_first_with_a_cursor(pool: PgPool) {
    let app = spawn_app(pool).await;
    // Three decisive games between six players: three winners, three losers.
    for _ in 0..3 {
        let (a, b) = two(&app).await;
        let id = ranked(&app, &a, &b, "statki").await;
        resign(&app, &id, &b).await;
    }
    let mut seen = Vec::new();
    let mut path = "/v1/ladder/statki?limit=2".to_owned();
    let mut pages = 0;
    loop {
        let page = ladder(&app, &path).await;
        pages += 1;
        seen.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["next"].as_str() {
            Some(next) => path = format!("/v1/ladder/statki?limit=2&after={next}"),
            None => {
                assert!(page.get("next").is_none(), "absent, not null: {page:?}");
                break;
            }
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 6);
    let ratings: Vec<f64> = seen.iter().map(|e| e["rating"].as_f64().unwrap()).collect();
    assert!(ratings.windows(2).all(|w| w[0] >= w[1]), "{ratings:?}");
    let ranks: Vec<i64> = seen.iter().map(|e| e["rank"].as_i64().unwrap()).collect();
    assert_eq!(ranks, [1, 1, 1, 4, 4, 4], "equal ratings share a rank");
    let mut ids: Vec<&str> = seen
        .iter()
        .map(|e| e["player_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6, "no player twice across pages");

    for (path, status, code) in [
        ("/v1/ladder/chess", StatusCode::NOT_FOUND, "unknown_ruleset"),
        (
            "/v1/ladder/statki?after=garbage",
            StatusCode::BAD_REQUEST,
            "invalid_cursor",
        ),
        (
            "/v1/ladder/statki?limit=0",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "/v1/ladder/statki?limit=101",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "/v1/ladder/statki?sort=name",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
    ] {
        let reply = app.get(path, None).await;
        assert_eq!(
            (reply.status, reply.code()),
            (status, code),
            "{path}: {:?}",
            reply.body
        );
        assert_eq!(reply.content_type, "application/problem+json");
    }
}

#[sqlx::test]
async fn a_players_matches_are_listed_newest_first_and_paginate(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (a, b) = two(&app).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = ranked(&app, &a, &b, "statki").await;
        resign(&app, &id, &a).await;
        ids.push(id);
    }
    // A match of others is not a's.
    let (c, d) = two(&app).await;
    ranked(&app, &c, &d, "statki").await;

    let first = app
        .get(&format!("/v1/players/{}/matches", b.id), Some(&a.token))
        .await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    let listed: Vec<&str> = first.body["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let newest_first: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(listed, newest_first);
    let finished = &first.body["matches"][0];
    assert_eq!(finished["ranked"], true);
    assert_eq!(finished["result"]["winner"], b.id.as_str());

    let page = app
        .get(
            &format!("/v1/players/{}/matches?limit=2", b.id),
            Some(&a.token),
        )
        .await;
    let cursor = page.body["next"].as_str().expect("a next page");
    let url = reqwest::Url::parse_with_params(
        &app.url(&format!("/v1/players/{}/matches", b.id)),
        &[("after", cursor)],
    )
    .unwrap();
    let rest = app.send(app.client.get(url).bearer_auth(&a.token)).await;
    assert_eq!(rest.status, StatusCode::OK, "{:?}", rest.body);
    assert!(rest.body.get("next").is_none(), "the last page has no next");
    let rest: Vec<&str> = rest.body["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(rest, [ids[0].as_str()]);

    let unknown = app
        .get(
            &format!("/v1/players/{}/matches", uuid::Uuid::now_v7()),
            Some(&a.token),
        )
        .await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::NOT_FOUND, "not_found")
    );
}

/// Every rated player's rank as the definition has it: one plus the rated players above
/// on the same ladder (equal ratings share a rank), counted the slow way.
async fn naive_ranks(pool: &PgPool, ruleset: &str) -> Vec<(uuid::Uuid, i64)> {
    sqlx::query_as(
        "SELECT r.player_id, 1 + (SELECT count(*) FROM ratings a
                                  WHERE a.ruleset = r.ruleset AND a.games > 0
                                    AND a.rating > r.rating)
         FROM ratings r WHERE r.ruleset = $1 AND r.games > 0
         ORDER BY r.rating DESC, r.player_id",
    )
    .bind(ruleset)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn ranks_from_bucket_counts_stay_exact_through_rating_changes(pool: PgPool) {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use statki::engine::{Rating, RatingChange, Score};
    use statki::store::ratings::{self, Rated};

    // Ratings from a small set, so players tie often, on and either side of bucket edges
    // (multiples of 8) and moving inside one bucket as well as across several.
    statki::store::migrate(&pool).await.unwrap();
    const AT: [f64; 9] = [
        1500.0, 1496.0, 1503.999, 1504.0, 1504.5, 1511.0, 1512.0, 1700.25, 1296.0,
    ];
    let players: Vec<uuid::Uuid> = sqlx::query_scalar(
        "INSERT INTO players (id, name, name_key)
         SELECT gen_random_uuid(), 'r' || g, 'r' || g FROM generate_series(1, 60) AS g
         RETURNING id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut rng = StdRng::seed_from_u64(21);
    let mut conn = pool.acquire().await.unwrap();
    // The history rows name matches this test does not make: foreign keys off, as a bulk
    // load has them.
    statki::store::bulk::begin_load(&mut conn).await.unwrap();
    let on_citus = crate::common::on_citus(&pool).await;
    if on_citus {
        sqlx::query("SET citus.propagate_set_commands = 'local'")
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let now = chrono::Utc::now();
    for round in 0..40 {
        let ruleset = if round % 4 == 3 { "statki" } else { "classic" };
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        if on_citus {
            // The workers check the foreign keys of their shards: the setting goes to them
            // with the transaction.
            sqlx::query("SET LOCAL session_replication_role = replica")
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        // A few matches in one transaction, a player in two of them at times.
        let mut made = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let a = players[rng.random_range(0..players.len())];
            let b = loop {
                let b = players[rng.random_range(0..players.len())];
                if b != a {
                    break b;
                }
            };
            let start = Rating {
                rating: 1500.0,
                deviation: 350.0,
                volatility: 0.06,
            };
            let standings = ratings::lock(&mut tx, ruleset, &[a, b], start, now)
                .await
                .unwrap();
            // A player already moved in this transaction moves on from there.
            let changes: Vec<RatingChange> = [a, b]
                .iter()
                .map(|player| {
                    let earlier = made
                        .iter()
                        .flat_map(|(_, changes): &(uuid::Uuid, Vec<RatingChange>)| changes)
                        .rfind(|change| change.player == *player);
                    let standing = standings.iter().find(|s| s.player_id == *player).unwrap();
                    let (before, games) = match earlier {
                        Some(change) => (change.after, i64::from(change.game)),
                        None => (standing.rating, standing.games),
                    };
                    RatingChange {
                        player: *player,
                        score: Score::Draw,
                        game: u32::try_from(games + 1).unwrap(),
                        before,
                        after: Rating {
                            rating: AT[rng.random_range(0..AT.len())],
                            ..before
                        },
                    }
                })
                .collect();
            made.push((uuid::Uuid::new_v4(), changes));
        }
        let rated: Vec<Rated<'_>> = made
            .iter()
            .map(|(match_id, changes)| Rated {
                match_id: *match_id,
                seq: 1,
                at: now,
                ruleset,
                changes,
            })
            .collect();
        ratings::record(&mut tx, &rated).await.unwrap();
        tx.commit().await.unwrap();

        assert_eq!(ratings::bucket_mismatches(&pool).await.unwrap(), []);
        for ruleset in ["classic", "statki"] {
            let naive = naive_ranks(&pool, ruleset).await;
            // Every page of 7 (cursors fall inside groups of equal ratings).
            let mut paged = Vec::new();
            let mut after = None;
            loop {
                let page = ratings::page(&pool, ruleset, after, 7).await.unwrap();
                let Some(last) = page.last() else { break };
                after = Some((last.standing.rating.rating, last.standing.player_id));
                paged.extend(page.iter().map(|row| (row.standing.player_id, row.rank)));
            }
            assert_eq!(paged, naive, "{ruleset} after round {round}");
            // And each player's own rank.
            for (player, rank) in &naive {
                let own = ratings::for_player(&pool, *player).await.unwrap();
                let own = own
                    .iter()
                    .find(|row| row.standing.ruleset == ruleset)
                    .unwrap();
                assert_eq!(own.rank, *rank, "{player} on {ruleset} after round {round}");
            }
        }
    }
    // Ties happened: some rank is shared.
    let naive = naive_ranks(&pool, "classic").await;
    let mut ranks: Vec<i64> = naive.iter().map(|(_, rank)| *rank).collect();
    let all = ranks.len();
    ranks.dedup();
    assert!(ranks.len() < all, "no tie to test: {naive:?}");
}
