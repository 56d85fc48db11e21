//! Matchmaking: the ranked queue (one replica and two on one database), the widening
//! window, expiry, the direct challenge and the rematch.

use crate::common;
use crate::ladder_support;

use std::collections::HashSet;

use common::{Player, TestApp, spawn_app, unique};
use ladder_support::{matchmaking_ahead, notices, ranked, resign, started};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

async fn join(app: &TestApp, player: &Player, ruleset: &str) -> Value {
    let reply = app
        .post("/v1/queue", &player.token, json!({ "ruleset": ruleset }))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    reply.body
}

async fn queue_state(app: &TestApp, player: &Player) -> Value {
    let reply = app.get("/v1/queue", Some(&player.token)).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

async fn view(app: &TestApp, id: &str, player: &Player) -> Value {
    let reply = app
        .get(&format!("/v1/matches/{id}"), Some(&player.token))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

async fn is_open(app: &TestApp, player: &Player, id: &str) -> bool {
    let reply = app
        .get("/v1/matches?status=open", Some(&player.token))
        .await;
    reply.body["matches"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == id)
}

/// A ranked match with both seats taken and the placement clock running.
fn assert_paired_match(view: &Value, a: &Player, b: &Player, ruleset: &str) {
    assert_eq!(view["phase"], "placement");
    assert_eq!(view["ranked"], true);
    assert_eq!(view["ruleset"], ruleset);
    let players: HashSet<&str> = view["players"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(players, HashSet::from([a.id.as_str(), b.id.as_str()]));
    assert!(
        view["deadline"].is_string(),
        "the placement clock runs: {view}"
    );
    let left = view["deadline_ms_left"].as_i64().unwrap();
    assert!(left > 110_000 && left <= 120_000, "{left}");
    assert_eq!(view["rules"]["clock"]["placement_seconds"], 120);
}

/// Gives `player` a ladder rating without playing (the queue reads only `ratings`).
async fn set_rating(app: &TestApp, player: &Player, ruleset: &str, rating: f64) {
    sqlx::query(
        "INSERT INTO ratings (ruleset, player_id, name, rating, deviation, volatility, games,
                              wins, losses, draws, updated_at)
         SELECT $1, id, name, $3, 200, 0.06, 1, 1, 0, 0, now() FROM players WHERE id = $2::uuid",
    )
    .bind(ruleset)
    .bind(&player.id)
    .bind(rating)
    .execute(&app.pool)
    .await
    .unwrap();
}

#[sqlx::test]
async fn two_queued_players_get_a_ranked_match_with_the_clock_running(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;

    let first = join(&app, &a, "classic").await;
    assert_eq!(first["status"], "queued");
    assert_eq!(first["ruleset"], "classic");
    assert_eq!(first["rating"], 1500.0);
    assert_eq!(first["window"], 100.0);
    assert_eq!(first["waiting"], 1);
    assert_eq!(queue_state(&app, &a).await["status"], "queued");

    let second = join(&app, &b, "classic").await;
    assert_eq!(second["status"], "paired", "{second}");
    let id = second["match_id"].as_str().unwrap().to_owned();
    let state = queue_state(&app, &a).await;
    assert_eq!(
        (state["status"].as_str(), state["match_id"].as_str()),
        (Some("paired"), Some(id.as_str()))
    );

    let seen = view(&app, &id, &a).await;
    assert_paired_match(&seen, &a, &b, "classic");
    assert_eq!(seen["you"], a.id.as_str());
    // The longer-waiting player has the first seat; nobody else may join.
    assert_eq!(seen["players"][0], a.id.as_str());
    let c = app.register(&unique("celina")).await;
    let late = app
        .post(&format!("/v1/matches/{id}/join"), &c.token, json!({}))
        .await;
    assert_eq!(
        (late.status, late.code()),
        (StatusCode::CONFLICT, "wrong_phase")
    );

    for (player, opponent) in [(&a, &b), (&b, &a)] {
        let paired = notices(&app, player, "paired").await;
        assert_eq!(paired.len(), 1, "{paired:?}");
        assert_eq!(paired[0]["match_id"], id.as_str());
        assert_eq!(paired[0]["ruleset"], "classic");
        assert_eq!(paired[0]["opponent"], opponent.id.as_str());
        // A pairing is neither a challenge nor a lobby join.
        assert!(notices(&app, player, "challenge").await.is_empty());
        assert!(notices(&app, player, "opponent_joined").await.is_empty());
    }
    let kinds: Vec<String> =
        sqlx::query_scalar("SELECT kind FROM match_events WHERE match_id = $1::uuid ORDER BY seq")
            .bind(&id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(kinds, ["match_created", "player_joined"]);

    // Playing, neither may queue again.
    let busy = app
        .post("/v1/queue", &a.token, json!({ "ruleset": "statki" }))
        .await;
    assert_eq!(
        (busy.status, busy.code()),
        (StatusCode::CONFLICT, "in_match")
    );
    // Once it is over, they may.
    resign(&app, &id, &a).await;
    assert_eq!(join(&app, &a, "statki").await["status"], "queued");
}

#[sqlx::test]
async fn queue_refusals_have_codes_and_change_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;

    let left = app.delete("/v1/queue", &a.token).await;
    assert_eq!(
        (left.status, left.code()),
        (StatusCode::NOT_FOUND, "not_queued")
    );
    let unknown = app
        .post("/v1/queue", &a.token, json!({ "ruleset": "chess" }))
        .await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_ruleset")
    );
    let bad = app
        .post(
            "/v1/queue",
            &a.token,
            json!({ "ruleset": "statki", "ranked": false }),
        )
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body")
    );
    let anonymous = app
        .send(
            app.client
                .post(app.url("/v1/queue"))
                .json(&json!({ "ruleset": "statki" })),
        )
        .await;
    assert_eq!(
        (anonymous.status, anonymous.code()),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    assert_eq!(queue_state(&app, &a).await["status"], "idle");

    join(&app, &a, "statki").await;
    let again = app
        .post("/v1/queue", &a.token, json!({ "ruleset": "classic" }))
        .await;
    assert_eq!(
        (again.status, again.code()),
        (StatusCode::CONFLICT, "already_queued")
    );
    let state = queue_state(&app, &a).await;
    assert_eq!(
        (state["status"].as_str(), state["ruleset"].as_str()),
        (Some("queued"), Some("statki"))
    );

    // Alone in the queue, a player is never paired, however long they wait.
    assert_eq!(matchmaking_ahead(&app, 300).await.paired, 0);
    let left = app.delete("/v1/queue", &a.token).await;
    assert_eq!(left.status, StatusCode::OK);
    assert_eq!(left.body["status"], "idle");
    assert_eq!(queue_state(&app, &a).await["status"], "idle");
    let matches: i64 = sqlx::query_scalar("SELECT count(*) FROM matches")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(matches, 0);
}

#[sqlx::test]
async fn a_retried_join_with_the_same_key_answers_the_same(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    join(&app, &a, "statki").await;
    let request = || {
        app.client
            .post(app.url("/v1/queue"))
            .bearer_auth(&b.token)
            .header("Idempotency-Key", "queue-1")
            .json(&json!({ "ruleset": "statki" }))
    };
    let first = app.send(request()).await;
    let retry = app.send(request()).await;
    assert_eq!(
        (first.status, retry.status),
        (StatusCode::CREATED, StatusCode::CREATED)
    );
    assert_eq!(first.body["status"], "paired");
    assert_eq!(
        retry.body, first.body,
        "the retry neither re-queues nor pairs again"
    );
    let queued: i64 =
        sqlx::query_scalar("SELECT count(*) FROM queue_entries WHERE match_id IS NULL")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(queued, 0);
}

#[sqlx::test]
async fn far_ratings_pair_only_once_the_window_has_widened(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let c = app.register(&unique("celina")).await;
    set_rating(&app, &b, "statki", 1800.0).await;
    set_rating(&app, &c, "classic", 1500.0).await;

    join(&app, &a, "statki").await;
    let far = join(&app, &b, "statki").await;
    assert_eq!(
        (far["status"].as_str(), far["rating"].as_f64()),
        (Some("queued"), Some(1800.0))
    );
    // Equal rating, other ladder: ladders never mix.
    assert_eq!(join(&app, &c, "classic").await["status"], "queued");

    // 300 apart: 30 s of waiting (a window of 250) is not enough, 45 s (325) is.
    assert_eq!(matchmaking_ahead(&app, 30).await.paired, 0);
    assert_eq!(queue_state(&app, &a).await["status"], "queued");
    assert_eq!(matchmaking_ahead(&app, 45).await.paired, 1);
    let state = queue_state(&app, &b).await;
    assert_eq!(state["status"], "paired");
    let id = state["match_id"].as_str().unwrap();
    assert_paired_match(&view(&app, id, &a).await, &a, &b, "statki");
    assert_eq!(notices(&app, &a, "paired").await.len(), 1);
    assert_eq!(queue_state(&app, &c).await["status"], "queued");
}

#[sqlx::test]
async fn the_closest_rating_is_paired_first(pool: PgPool) {
    let app = spawn_app(pool).await;
    let far = app.register(&unique("far")).await;
    let near = app.register(&unique("near")).await;
    let me = app.register(&unique("me")).await;
    set_rating(&app, &far, "statki", 1420.0).await;
    set_rating(&app, &near, "statki", 1580.0).await;
    set_rating(&app, &me, "statki", 1560.0).await;
    join(&app, &far, "statki").await;
    join(&app, &near, "statki").await; // 160 apart: no pair yet
    let mine = join(&app, &me, "statki").await;
    assert_eq!(mine["status"], "paired", "{mine}");
    let id = mine["match_id"].as_str().unwrap();
    assert_paired_match(&view(&app, id, &me).await, &me, &near, "statki");
    assert_eq!(queue_state(&app, &far).await["status"], "queued");
}

#[sqlx::test]
async fn stale_entries_expire(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    set_rating(&app, &b, "statki", 2900.0).await; // too far ever to be paired with a
    join(&app, &a, "statki").await;
    join(&app, &b, "statki").await;
    assert_eq!(matchmaking_ahead(&app, 599).await.purged, 0);
    let swept = matchmaking_ahead(&app, 601).await;
    assert_eq!((swept.purged, swept.paired), (2, 0));
    assert_eq!(queue_state(&app, &a).await["status"], "idle");
    let left = app.delete("/v1/queue", &a.token).await;
    assert_eq!(left.code(), "not_queued");
    assert_eq!(join(&app, &a, "statki").await["status"], "queued");
}

#[sqlx::test]
async fn two_replicas_on_one_database_pair_across_each_other(pool: PgPool) {
    let one = spawn_app(pool.clone()).await;
    let two = spawn_app(pool).await;
    let a = one.register(&unique("ala")).await;
    let b = two.register(&unique("bolek")).await;
    assert_eq!(join(&one, &a, "statki").await["status"], "queued");
    let paired = join(&two, &b, "statki").await;
    assert_eq!(paired["status"], "paired");
    let id = paired["match_id"].as_str().unwrap();
    assert_eq!(queue_state(&one, &a).await["match_id"], id);
    assert_paired_match(&view(&one, id, &b).await, &a, &b, "statki");
}

#[sqlx::test]
async fn concurrent_joins_on_two_replicas_pair_everyone_exactly_once(pool: PgPool) {
    let one = spawn_app(pool.clone()).await;
    let two = spawn_app(pool).await;
    let mut players = Vec::new();
    for i in 0..10 {
        let app = if i % 2 == 0 { &one } else { &two };
        players.push(app.register(&unique("p")).await);
    }
    let joins = players.iter().enumerate().map(|(i, player)| {
        let app = if i % 2 == 0 { &one } else { &two };
        app.send(
            app.client
                .post(app.url("/v1/queue"))
                .bearer_auth(&player.token)
                .json(&json!({ "ruleset": "statki" })),
        )
    });
    for reply in futures::future::join_all(joins).await {
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    }
    // Joins that could not see each other are paired by the sweeps, which both replicas
    // run at once.
    for _ in 0..5 {
        tokio::join!(matchmaking_ahead(&one, 0), matchmaking_ahead(&two, 0));
        let waiting: i64 =
            sqlx::query_scalar("SELECT count(*) FROM queue_entries WHERE match_id IS NULL")
                .fetch_one(&one.pool)
                .await
                .unwrap();
        if waiting == 0 {
            break;
        }
    }
    let seats: Vec<(String, String)> = sqlx::query_as(
        "SELECT creator::text, joiner::text FROM matches WHERE ranked AND phase = 'placement'",
    )
    .fetch_all(&one.pool)
    .await
    .unwrap();
    assert_eq!(seats.len(), 5, "{seats:?}");
    let mut seen = HashSet::new();
    for (creator, joiner) in &seats {
        assert_ne!(creator, joiner);
        assert!(seen.insert(creator.clone()), "{creator} is in two matches");
        assert!(seen.insert(joiner.clone()), "{joiner} is in two matches");
    }
    assert_eq!(seen.len(), 10);
    for (i, player) in players.iter().enumerate() {
        let app = if i % 2 == 0 { &two } else { &one };
        let state = queue_state(app, player).await;
        assert_eq!(state["status"], "paired", "{state}");
        assert_eq!(notices(app, player, "paired").await.len(), 1);
    }
}

#[sqlx::test]
async fn a_direct_challenge_admits_only_the_invited_player(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let c = app.register(&unique("celina")).await;
    let id = app
        .create_match(
            &a,
            json!({ "ruleset": "battaglia", "ranked": true, "opponent": b.id }),
        )
        .await;

    let challenges = notices(&app, &b, "challenge").await;
    assert_eq!(challenges.len(), 1);
    assert_eq!(challenges[0]["match_id"], id.as_str());
    assert_eq!(challenges[0]["from"], a.id.as_str());
    assert_eq!(challenges[0]["ranked"], true);
    assert!(notices(&app, &c, "challenge").await.is_empty());

    // Only the invited player sees it among the open matches, and only they may join.
    assert!(is_open(&app, &b, &id).await);
    assert!(!is_open(&app, &c, &id).await);
    let before = app.event_count().await;
    let stranger = app
        .post(&format!("/v1/matches/{id}/join"), &c.token, json!({}))
        .await;
    assert_eq!(
        (stranger.status, stranger.code()),
        (StatusCode::FORBIDDEN, "not_invited")
    );
    assert_eq!(app.event_count().await, before);
    let invited = app
        .post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
        .await;
    assert_eq!(invited.status, StatusCode::OK, "{:?}", invited.body);
    assert_eq!(invited.body["phase"], "placement");
    let joined = notices(&app, &a, "opponent_joined").await;
    assert_eq!(joined.len(), 1);
    assert_eq!(joined[0]["player"], b.id.as_str());
}

#[sqlx::test]
async fn the_invited_player_declines_a_challenge_and_the_challenger_is_told(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let c = app.register(&unique("celina")).await;
    let id = app.create_match(&a, json!({ "opponent": b.id })).await;
    let open = app.create_match(&a, json!({})).await;
    let decline = |player: &Player, id: &str| {
        app.post(
            &format!("/v1/matches/{id}/decline"),
            &player.token,
            json!({}),
        )
    };

    // Nobody but the invited player may decline, and refusals change nothing.
    let before = app.event_count().await;
    for (player, match_id) in [(&c, &id), (&a, &id), (&b, &open)] {
        let refused = decline(player, match_id).await;
        assert_eq!(
            (refused.status, refused.code()),
            (StatusCode::FORBIDDEN, "not_invited"),
            "{:?}",
            refused.body
        );
    }
    assert_eq!(app.event_count().await, before);

    let declined = decline(&b, &id).await;
    assert_eq!(declined.status, StatusCode::OK, "{:?}", declined.body);
    assert_eq!(declined.body["phase"], "cancelled");
    let events = ladder_support::events(&app, &id, &a).await;
    let last = events.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["reason"].as_str()),
        (Some("match_cancelled"), Some("declined"))
    );
    let told = notices(&app, &a, "challenge_declined").await;
    assert_eq!(told.len(), 1);
    assert_eq!(
        (told[0]["match_id"].as_str(), told[0]["player"].as_str()),
        (Some(id.as_str()), Some(b.id.as_str()))
    );
    assert!(!is_open(&app, &b, &id).await);

    // Declined once: a second decline, or a join, finds it over.
    let again = decline(&b, &id).await;
    assert_eq!(
        (again.status, again.code()),
        (StatusCode::CONFLICT, "wrong_phase")
    );
    let join = app
        .post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
        .await;
    assert_eq!(
        (join.status, join.code()),
        (StatusCode::CONFLICT, "wrong_phase")
    );
}

#[sqlx::test]
async fn both_asking_starts_a_rematch_with_the_same_rules(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let id = ranked(&app, &a, &b, "classic").await;
    let path = format!("/v1/matches/{id}/rematch");

    // Not before the match is over.
    let early = app.post(&path, &a.token, json!({})).await;
    assert_eq!(
        (early.status, early.code()),
        (StatusCode::CONFLICT, "rematch_unavailable")
    );
    resign(&app, &id, &b).await;

    let c = app.register(&unique("celina")).await;
    let outsider = app.post(&path, &c.token, json!({})).await;
    assert_eq!(
        (outsider.status, outsider.code()),
        (StatusCode::FORBIDDEN, "not_a_player")
    );
    let missing = app
        .post(
            &format!("/v1/matches/{}/rematch", uuid::Uuid::now_v7()),
            &a.token,
            json!({}),
        )
        .await;
    assert_eq!(
        (missing.status, missing.code()),
        (StatusCode::NOT_FOUND, "not_found")
    );

    let offered = app.post(&path, &a.token, json!({})).await;
    assert_eq!(offered.status, StatusCode::OK, "{:?}", offered.body);
    assert_eq!(offered.body["status"], "offered");
    assert_eq!(offered.body["offers"][0]["player"], a.id.as_str());
    let left = offered.body["offers"][0]["expires_ms_left"]
        .as_i64()
        .unwrap();
    assert!((110_000..=120_000).contains(&left), "{left}");
    // Asking again renews the offer without telling the opponent twice.
    let renewed = app.post(&path, &a.token, json!({})).await;
    assert_eq!(renewed.body["status"], "offered");
    let offers = notices(&app, &b, "rematch_offered").await;
    assert_eq!(offers.len(), 1);
    assert_eq!(
        (offers[0]["match_id"].as_str(), offers[0]["from"].as_str()),
        (Some(id.as_str()), Some(a.id.as_str()))
    );
    assert!(notices(&app, &a, "rematch_offered").await.is_empty());
    assert_eq!(
        app.get(&path, Some(&c.token)).await.body["status"],
        "offered"
    );

    let accepted = app.post(&path, &b.token, json!({})).await;
    assert_eq!(accepted.status, StatusCode::OK, "{:?}", accepted.body);
    assert_eq!(accepted.body["status"], "started");
    let rematch = accepted.body["rematch_id"].as_str().unwrap().to_owned();
    assert_ne!(rematch, id);
    let seen = view(&app, &rematch, &a).await;
    assert_paired_match(&seen, &a, &b, "classic");
    // Seats swap: the first match's joiner creates the rematch.
    assert_eq!(seen["players"][0], b.id.as_str());
    for (player, opponent) in [(&a, &b), (&b, &a)] {
        let started = notices(&app, player, "rematch_started").await;
        assert_eq!(started.len(), 1);
        // Each is told who the opponent is, by id and by name.
        assert_eq!(started[0]["opponent"], opponent.id.as_str());
        assert_eq!(
            started[0]["names"][opponent.id.as_str()],
            opponent.name.as_str(),
            "{:?}",
            started[0]
        );
        assert_eq!(
            (
                started[0]["match_id"].as_str(),
                started[0]["previous"].as_str()
            ),
            (Some(rematch.as_str()), Some(id.as_str()))
        );
        assert_eq!(started[0]["ranked"], true);
    }
    // A late ask answers the same rematch; nothing new starts.
    let late = app.post(&path, &a.token, json!({})).await;
    assert_eq!(
        (
            late.body["status"].as_str(),
            late.body["rematch_id"].as_str()
        ),
        (Some("started"), Some(rematch.as_str()))
    );
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM matches")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(count, 2);
}

#[sqlx::test]
async fn an_unranked_rematch_keeps_the_house_rules_and_offers_expire(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let body = json!({
        "ruleset": "battaglia",
        "options": { "extra_shot_on_hit": true },
        "clock": { "placement_seconds": 60, "shot_seconds": 10 },
    });
    let id = started(&app, &a, &b, body).await;
    resign(&app, &id, &a).await;
    let path = format!("/v1/matches/{id}/rematch");

    assert_eq!(
        app.post(&path, &a.token, json!({})).await.body["status"],
        "offered"
    );
    // The offer lapses after two minutes; b's later ask is only an offer of its own.
    assert_eq!(matchmaking_ahead(&app, 121).await.purged, 1);
    assert_eq!(app.get(&path, Some(&b.token)).await.body["status"], "none");
    let own = app.post(&path, &b.token, json!({})).await;
    assert_eq!(own.body["status"], "offered");
    assert_eq!(own.body["offers"].as_array().unwrap().len(), 1);

    let started = app.post(&path, &a.token, json!({})).await;
    assert_eq!(started.body["status"], "started");
    let rematch = started.body["rematch_id"].as_str().unwrap();
    let seen = view(&app, rematch, &a).await;
    assert_eq!(seen["ranked"], false);
    assert_eq!(seen["phase"], "placement");
    assert_eq!(seen["rules"]["options"]["extra_shot_on_hit"], true);
    assert_eq!(seen["rules"]["clock"]["shot_seconds"], 10);
    assert_eq!(seen["rules"]["clock"]["placement_seconds"], 60);
}
