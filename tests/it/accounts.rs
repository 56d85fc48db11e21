//! Accounts over HTTP: passwords, log-in, the own profile, token refresh and revocation
//! (on every replica), idempotent registration, and a backend minting its own tokens.

use crate::common;

use std::time::Duration;

use common::{Player, Reply, SECRET, TestApp, allow_connections, spawn_app, unique};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use statki::auth::Tokens;

async fn register_with(app: &TestApp, body: Value, key: Option<&str>) -> Reply {
    let mut request = app.client.post(app.url("/v1/players")).json(&body);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    app.send(request).await
}

/// Registers `name` with `password`; returns the player.
async fn register_password(app: &TestApp, name: &str, password: &str) -> Player {
    let reply = register_with(app, json!({ "name": name, "password": password }), None).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    player_of(&reply)
}

fn player_of(reply: &Reply) -> Player {
    Player {
        id: reply.body["id"].as_str().unwrap().to_owned(),
        name: reply.body["name"].as_str().unwrap().to_owned(),
        token: reply.body["token"].as_str().unwrap().to_owned(),
    }
}

async fn log_in(app: &TestApp, name: &str, password: &str) -> Reply {
    app.send(
        app.client
            .post(app.url("/v1/sessions"))
            .json(&json!({ "name": name, "password": password })),
    )
    .await
}

async fn post_empty(app: &TestApp, path: &str, token: &str) -> Reply {
    app.send(app.client.post(app.url(path)).bearer_auth(token))
        .await
}

/// Waits until the app's live listener is up, so its revocation cache is in use.
async fn listening(app: &TestApp) {
    for _ in 0..200 {
        if app.live.is_listening() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the live listener did not connect");
}

/// Every read and write a token opens, answered for `token`: (route, status).
async fn statuses_for(
    app: &TestApp,
    token: &str,
    player: &Player,
    match_id: &str,
) -> Vec<(String, StatusCode)> {
    let mut answers = Vec::new();
    for path in [
        "/v1/me".to_owned(),
        "/v1/matches?status=open".to_owned(),
        format!("/v1/matches/{match_id}"),
        format!("/v1/matches/{match_id}/events"),
        format!("/v1/players/{}/matches", player.id),
        "/v1/queue".to_owned(),
    ] {
        answers.push((
            format!("GET {path}"),
            app.get(&path, Some(token)).await.status,
        ));
    }
    let created = app.post("/v1/matches", token, json!({})).await;
    answers.push(("POST /v1/matches".into(), created.status));
    let refreshed = post_empty(app, "/v1/me/token", token).await;
    answers.push(("POST /v1/me/token".into(), refreshed.status));
    answers
}

#[sqlx::test]
async fn a_player_with_a_password_logs_in_from_anywhere(pool: PgPool) {
    let app = spawn_app(pool).await;
    let name = unique("Ala");
    let ala = register_password(&app, &name, "correct horse battery").await;
    let reply = log_in(&app, &name.to_uppercase(), "correct horse battery").await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert_eq!(reply.body["id"], ala.id.as_str());
    assert_eq!(reply.body["name"], name.as_str(), "the name as registered");
    let token = reply.body["token"].as_str().unwrap();
    assert_ne!(token, ala.token);
    let me = app.get("/v1/me", Some(token)).await;
    assert_eq!(me.status, StatusCode::OK, "{:?}", me.body);
    assert_eq!(me.body["id"], ala.id.as_str());
    assert_eq!(me.body["has_password"], true);
    assert_eq!(me.body["wins"], 0);
    let text = me.body.to_string();
    assert!(
        !text.contains("argon2") && !text.contains("correct horse"),
        "{text}"
    );
}

#[sqlx::test]
async fn every_failed_log_in_gets_the_same_answer(pool: PgPool) {
    let app = spawn_app(pool).await;
    let with = unique("ala");
    register_password(&app, &with, "correct horse battery").await;
    let without = app.register(&unique("bolek")).await;
    let wrong = log_in(&app, &with, "correct horse batterY").await;
    let unknown = log_in(&app, &unique("nobody"), "correct horse battery").await;
    let no_password = log_in(&app, &without.name, "correct horse battery").await;
    let short = log_in(&app, &with, "x").await;
    for reply in [&wrong, &unknown, &no_password, &short] {
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.content_type, "application/problem+json");
        assert_eq!(reply.body, wrong.body, "one answer for every failure");
    }
    assert_eq!(wrong.code(), "invalid_credentials");
    let malformed = app
        .send(
            app.client
                .post(app.url("/v1/sessions"))
                .json(&json!({ "name": with })),
        )
        .await;
    assert_eq!(malformed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(malformed.code(), "invalid_body");
}

#[sqlx::test]
async fn a_password_outside_8_to_128_characters_registers_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let name = unique("ala");
    for password in ["1234567".to_owned(), "x".repeat(129)] {
        let reply = register_with(&app, json!({ "name": name, "password": password }), None).await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{:?}",
            reply.body
        );
        assert_eq!(reply.code(), "invalid_password");
    }
    // Eight characters, counted as characters, not bytes.
    register_password(&app, &name, "żółć1234").await;
    assert_eq!(log_in(&app, &name, "żółć1234").await.status, StatusCode::OK);
}

#[sqlx::test]
async fn the_password_hash_is_argon2id_and_stored_apart(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let ala = register_password(&app, &unique("ala"), "correct horse battery").await;
    let hash: String =
        sqlx::query_scalar("SELECT password_hash FROM player_passwords WHERE player_id = $1::uuid")
            .bind(&ala.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(!hash.contains("correct horse"));
}

#[sqlx::test]
async fn a_password_is_set_then_changed_only_with_the_current_one(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register(&unique("ala")).await;
    assert_eq!(
        app.get("/v1/me", Some(&ala.token)).await.body["has_password"],
        false
    );
    let short = app
        .put(
            "/v1/me/password",
            &ala.token,
            json!({ "password": "short" }),
        )
        .await;
    assert_eq!(
        (short.status, short.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_password")
    );
    let set = app
        .put(
            "/v1/me/password",
            &ala.token,
            json!({ "password": "first password" }),
        )
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{:?}", set.body);
    assert_eq!(
        log_in(&app, &ala.name, "first password").await.status,
        StatusCode::OK
    );

    let missing = app
        .put(
            "/v1/me/password",
            &ala.token,
            json!({ "password": "second password" }),
        )
        .await;
    assert_eq!(missing.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(missing.code(), "current_password_required");
    let wrong = app
        .put(
            "/v1/me/password",
            &ala.token,
            json!({ "password": "second password", "current_password": "not the one" }),
        )
        .await;
    assert_eq!(
        (wrong.status, wrong.code()),
        (StatusCode::FORBIDDEN, "wrong_password")
    );
    assert_eq!(
        log_in(&app, &ala.name, "second password").await.status,
        StatusCode::UNAUTHORIZED
    );

    let changed = app
        .put(
            "/v1/me/password",
            &ala.token,
            json!({ "password": "second password", "current_password": "first password" }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::NO_CONTENT, "{:?}", changed.body);
    assert_eq!(
        log_in(&app, &ala.name, "second password").await.status,
        StatusCode::OK
    );
    assert_eq!(
        log_in(&app, &ala.name, "first password").await.status,
        StatusCode::UNAUTHORIZED
    );
    let anonymous = app
        .send(
            app.client
                .put(app.url("/v1/me/password"))
                .json(&json!({ "password": "x".repeat(9) })),
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn a_fresh_token_works_beside_the_old_one(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register(&unique("ala")).await;
    let fresh = post_empty(&app, "/v1/me/token", &ala.token).await;
    assert_eq!(fresh.status, StatusCode::OK, "{:?}", fresh.body);
    assert_eq!(fresh.body["id"], ala.id.as_str());
    assert_eq!(fresh.body["name"], ala.name.as_str());
    let token = fresh.body["token"].as_str().unwrap();
    assert_ne!(token, ala.token);
    assert_eq!(app.get("/v1/me", Some(token)).await.status, StatusCode::OK);
    assert_eq!(
        app.get("/v1/me", Some(&ala.token)).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.get("/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[sqlx::test]
async fn revoking_refuses_every_earlier_token_everywhere_and_answers_a_new_one(pool: PgPool) {
    let app = spawn_app(pool).await;
    listening(&app).await;
    let ala = app.register(&unique("ala")).await;
    let bolek = app.register(&unique("bolek")).await;
    let match_id = app.create_match(&bolek, json!({})).await;
    let refreshed = post_empty(&app, "/v1/me/token", &ala.token).await.body["token"]
        .as_str()
        .unwrap()
        .to_owned();
    for (route, status) in statuses_for(&app, &ala.token, &ala, &match_id).await {
        assert!(status.is_success(), "{route}: {status} before revoking");
    }

    let revoked = app.delete("/v1/me/tokens", &ala.token).await;
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
    let new_token = revoked.body["token"].as_str().unwrap().to_owned();
    for old in [&ala.token, &refreshed] {
        for (route, status) in statuses_for(&app, old, &ala, &match_id).await {
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{route} with a revoked token"
            );
        }
        let again = app.delete("/v1/me/tokens", old).await;
        assert_eq!(
            (again.status, again.code()),
            (StatusCode::UNAUTHORIZED, "unauthorized")
        );
    }
    for (route, status) in statuses_for(&app, &new_token, &ala, &match_id).await {
        assert!(status.is_success(), "{route}: {status} with the new token");
    }
    // Someone else's tokens are untouched.
    assert_eq!(
        app.get("/v1/me", Some(&bolek.token)).await.status,
        StatusCode::OK
    );
}

#[sqlx::test]
async fn a_token_is_judged_by_the_microsecond_of_its_revocation(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    listening(&app).await;
    let ala = app.register(&unique("ala")).await;
    let revoked = app.delete("/v1/me/tokens", &ala.token).await;
    assert_eq!(revoked.status, StatusCode::OK);
    let valid_from: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT tokens_valid_from FROM players WHERE id = $1::uuid")
            .bind(&ala.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    let tokens = Tokens::new(SECRET).unwrap();
    let id = ala.id.parse().unwrap();
    let before = tokens
        .mint(id, valid_from - chrono::Duration::microseconds(1))
        .unwrap();
    let at = tokens.mint(id, valid_from).unwrap();
    let same_second_before = tokens.mint(id, valid_from.with_nanosecond_floor()).unwrap();
    assert_eq!(
        app.get("/v1/me", Some(&before)).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(app.get("/v1/me", Some(&at)).await.status, StatusCode::OK);
    if valid_from.timestamp_subsec_micros() > 0 {
        assert_eq!(
            app.get("/v1/me", Some(&same_second_before)).await.status,
            StatusCode::UNAUTHORIZED,
            "issued earlier in the same second"
        );
    }
    // Tokens issued right after, in the same second, are valid.
    let fresh = post_empty(
        &app,
        "/v1/me/token",
        revoked.body["token"].as_str().unwrap(),
    )
    .await;
    assert_eq!(fresh.status, StatusCode::OK);
    assert_eq!(
        app.get("/v1/me", Some(fresh.body["token"].as_str().unwrap()))
            .await
            .status,
        StatusCode::OK
    );
    let logged_out_backend = Tokens::new(SECRET)
        .unwrap()
        .mint(id, valid_from + chrono::Duration::milliseconds(1))
        .unwrap();
    assert_eq!(
        app.get("/v1/me", Some(&logged_out_backend)).await.status,
        StatusCode::OK
    );
}

trait FloorSecond {
    fn with_nanosecond_floor(self) -> Self;
}

impl FloorSecond for chrono::DateTime<chrono::Utc> {
    fn with_nanosecond_floor(self) -> Self {
        chrono::DateTime::from_timestamp(self.timestamp(), 0).unwrap()
    }
}

#[sqlx::test]
async fn revocation_holds_on_every_replica_at_once(pool: PgPool) {
    let one = spawn_app(pool.clone()).await;
    let two = spawn_app(pool).await;
    listening(&one).await;
    listening(&two).await;
    let ala = one.register(&unique("ala")).await;
    // Both replicas have the player cached as valid.
    assert_eq!(
        one.get("/v1/me", Some(&ala.token)).await.status,
        StatusCode::OK
    );
    assert_eq!(
        two.get("/v1/me", Some(&ala.token)).await.status,
        StatusCode::OK
    );
    assert!(two.live.revocations().cached() >= 1);

    let revoked = one.delete("/v1/me/tokens", &ala.token).await;
    assert_eq!(revoked.status, StatusCode::OK);
    let new_token = revoked.body["token"].as_str().unwrap();
    let other = two.get("/v1/me", Some(&ala.token)).await;
    assert_eq!(
        other.status,
        StatusCode::UNAUTHORIZED,
        "the other replica, at once"
    );
    assert_eq!(
        two.get("/v1/me", Some(new_token)).await.status,
        StatusCode::OK
    );
    assert_eq!(
        one.get("/v1/me", Some(&ala.token)).await.status,
        StatusCode::UNAUTHORIZED
    );

    // And back: revoking on the second replica refuses the first's token on the first.
    let again = two.delete("/v1/me/tokens", new_token).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        one.get("/v1/me", Some(new_token)).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        one.get("/v1/me", Some(again.body["token"].as_str().unwrap()))
            .await
            .status,
        StatusCode::OK
    );
}

#[sqlx::test]
async fn a_validly_signed_token_of_no_player_is_refused_on_reads_too(pool: PgPool) {
    let app = spawn_app(pool).await;
    let owner = app.register(&unique("ala")).await;
    let match_id = app.create_match(&owner, json!({})).await;
    let ghost_id = uuid::Uuid::now_v7();
    let ghost = Tokens::new(SECRET)
        .unwrap()
        .mint(ghost_id, chrono::Utc::now())
        .unwrap();
    let ghost_player = Player {
        id: ghost_id.to_string(),
        name: "ghost".into(),
        token: ghost.clone(),
    };
    for (route, status) in statuses_for(&app, &ghost, &ghost_player, &match_id).await {
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{route}");
    }
    let reply = app.get("/v1/me", Some(&ghost)).await;
    assert_eq!(reply.code(), "unauthorized");
    assert!(
        reply.body["detail"]
            .as_str()
            .unwrap()
            .contains("does not exist")
    );
}

#[sqlx::test]
async fn a_retried_registration_gets_the_first_answer(pool: PgPool) {
    let app = spawn_app(pool).await;
    let name = unique("ala");
    let key = uuid::Uuid::new_v4().to_string();
    let body = json!({ "name": name });
    let first = register_with(&app, body.clone(), Some(&key)).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    let retry = register_with(&app, body.clone(), Some(&key)).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{:?}", retry.body);
    assert_eq!(retry.body, first.body, "the first answer, token included");
    let fresh_key = register_with(&app, body, Some(&uuid::Uuid::new_v4().to_string())).await;
    assert_eq!(
        (fresh_key.status, fresh_key.code()),
        (StatusCode::CONFLICT, "name_taken")
    );
    let other = register_with(&app, json!({ "name": unique("bolek") }), Some(&key)).await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
    // Registration keys are a space of their own: a player's key of the same value is
    // another key.
    let player = player_of(&first);
    let created = app
        .send(
            app.client
                .post(app.url("/v1/matches"))
                .bearer_auth(&player.token)
                .header("idempotency-key", &key)
                .json(&json!({})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
}

#[sqlx::test]
async fn a_registration_replay_hands_out_no_token_once_a_password_is_set(pool: PgPool) {
    let app = spawn_app(pool).await;
    let name = unique("ala");
    let key = uuid::Uuid::new_v4().to_string();
    let body = json!({ "name": name });
    let first = register_with(&app, body.clone(), Some(&key)).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    let owner = player_of(&first);
    let set = app
        .put(
            "/v1/me/password",
            &owner.token,
            json!({ "password": "owner password" }),
        )
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{:?}", set.body);
    // Someone who learnt the key and the name, from anywhere, within the 24 h.
    let replay = register_with(&app, body, Some(&key)).await;
    assert_eq!(
        (replay.status, replay.code()),
        (StatusCode::CONFLICT, "name_taken"),
        "{:?}",
        replay.body
    );
    assert!(replay.body.get("token").is_none());
    // The owner logs in as usual.
    let session = log_in(&app, &name, "owner password").await;
    assert_eq!(session.status, StatusCode::OK, "{:?}", session.body);
}

#[sqlx::test]
async fn a_player_stores_a_bounded_number_of_refresh_keys(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let ala = app.register(&unique("ala")).await;
    let kept = statki::app::REFRESH_KEYS_KEPT;
    let refresh = |key: String| {
        app.send(
            app.client
                .post(app.url("/v1/me/token"))
                .bearer_auth(&ala.token)
                .header("idempotency-key", key),
        )
    };
    let mut tokens = Vec::new();
    for i in 0..kept + 8 {
        let reply = refresh(format!("refresh-{i}")).await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        tokens.push(reply.body["token"].as_str().unwrap().to_owned());
    }
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM idempotency_keys WHERE player_id = $1::uuid")
            .bind(&ala.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, kept, "only the newest refresh keys are kept");
    // The newest keys still replay their first answer.
    let last = refresh(format!("refresh-{}", kept + 7)).await;
    assert_eq!(last.body["token"], tokens[tokens.len() - 1]);
    // A forgotten one is a new refresh: another valid token, nothing refused.
    let forgotten = refresh("refresh-0".into()).await;
    assert_eq!(forgotten.status, StatusCode::OK);
    assert_ne!(forgotten.body["token"], tokens[0]);
}

#[sqlx::test]
async fn a_retried_registration_with_a_password_needs_that_password(pool: PgPool) {
    let app = spawn_app(pool).await;
    let name = unique("ala");
    let key = uuid::Uuid::new_v4().to_string();
    let first = register_with(
        &app,
        json!({ "name": name, "password": "first password" }),
        Some(&key),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    let retry = register_with(
        &app,
        json!({ "name": name, "password": "first password" }),
        Some(&key),
    )
    .await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.body, first.body);
    let guess = register_with(
        &app,
        json!({ "name": name, "password": "other password" }),
        Some(&key),
    )
    .await;
    assert_eq!(
        (guess.status, guess.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
    assert!(guess.body.get("token").is_none());
    let without = register_with(&app, json!({ "name": name }), Some(&key)).await;
    assert_eq!(
        (without.status, without.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
}

#[sqlx::test]
async fn concurrent_retries_register_one_player(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let name = unique("ala");
    let key = uuid::Uuid::new_v4().to_string();
    let body = json!({ "name": name, "password": "first password" });
    let replies =
        futures::future::join_all((0..4).map(|_| register_with(&app, body.clone(), Some(&key))))
            .await;
    let created: Vec<&Reply> = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .collect();
    assert!(!created.is_empty());
    for reply in &replies {
        assert!(
            reply.status == StatusCode::CREATED || reply.code() == "idempotency_key_in_progress",
            "{:?}",
            reply.body
        );
    }
    for reply in &created {
        assert_eq!(reply.body["id"], created[0].body["id"]);
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM players WHERE name = $1")
        .bind(&name)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

const README: &str = include_str!("../../README.md");

/// The first ```python block of the README's "Tokens for your own backend" section.
fn readme_minting_example() -> String {
    let section = README
        .split("### Tokens for your own backend")
        .nth(1)
        .expect("the README has the section");
    let block = section
        .split("```python\n")
        .nth(1)
        .expect("the section has a python block");
    block
        .split("```")
        .next()
        .expect("a closed block")
        .to_owned()
}

/// Runs the README's example as written with `python` and returns the token it mints.
async fn mint_as_the_readme_shows(python: &str, player: &str) -> String {
    let program = format!(
        "{}\nimport sys\nprint(statki_token(sys.argv[1], sys.argv[2]))\n",
        readme_minting_example()
    );
    let output = tokio::process::Command::new(python)
        .arg("-c")
        .arg(program)
        .arg(player)
        .arg(std::str::from_utf8(SECRET).unwrap())
        .output()
        .await
        .expect("python runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[sqlx::test]
#[ignore = "needs Python with PyJWT; scripts/checks/50-readme-token runs it"]
async fn the_readme_minting_example_works_as_written(pool: PgPool) {
    let python = std::env::var("STATKI_README_PYTHON").unwrap_or_else(|_| "python3".into());
    let app = spawn_app(pool).await;
    listening(&app).await;
    let ala = app.register(&unique("ala")).await;
    let minted = mint_as_the_readme_shows(&python, &ala.id).await;
    let me = app.get("/v1/me", Some(&minted)).await;
    assert_eq!(me.status, StatusCode::OK, "{:?}", me.body);
    assert_eq!(me.body["id"], ala.id.as_str());
    let created = app.post("/v1/matches", &minted, json!({})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);

    // Revocation reaches backend-minted tokens too, judged by their fractional `iat`.
    let revoked = app.delete("/v1/me/tokens", &ala.token).await;
    assert_eq!(revoked.status, StatusCode::OK);
    let refused = app.get("/v1/me", Some(&minted)).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let after = mint_as_the_readme_shows(&python, &ala.id).await;
    assert_eq!(app.get("/v1/me", Some(&after)).await.status, StatusCode::OK);
}

#[sqlx::test]
async fn a_retried_password_change_succeeds_again_and_changes_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register(&unique("ala")).await;
    let key = uuid::Uuid::new_v4().to_string();
    let put = |body: Value, key: &str| {
        app.send(
            app.client
                .put(app.url("/v1/me/password"))
                .bearer_auth(&ala.token)
                .header("idempotency-key", key)
                .json(&body),
        )
    };
    let body = json!({ "password": "first password" });
    assert_eq!(put(body.clone(), &key).await.status, StatusCode::NO_CONTENT);
    // Without the key this retry would need `current_password` now.
    assert_eq!(put(body, &key).await.status, StatusCode::NO_CONTENT);
    let other = put(json!({ "password": "other password" }), &key).await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
    assert_eq!(
        log_in(&app, &ala.name, "first password").await.status,
        StatusCode::OK
    );
    assert_eq!(
        log_in(&app, &ala.name, "other password").await.status,
        StatusCode::UNAUTHORIZED
    );
}

/// Kills this database's listening connections; returns how many were killed.
async fn kill_listeners(pool: &PgPool) -> i64 {
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(statki::live::LISTENER_APPLICATION_NAME)
    .fetch_all(pool)
    .await
    .unwrap();
    killed.len() as i64
}

#[sqlx::test]
async fn a_revocation_missed_while_not_listening_still_holds(
    options: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    // Every connection the apps need is opened before the database is closed to new ones,
    // so only the listeners are locked out.
    let pool = options
        .min_connections(8)
        .max_connections(8)
        .connect_with(connect)
        .await
        .unwrap();
    let warm: Vec<_> = futures::future::join_all((0..8).map(|_| pool.acquire())).await;
    drop(warm);
    let one = spawn_app(pool.clone()).await;
    let two = spawn_app(pool.clone()).await;
    listening(&one).await;
    listening(&two).await;
    let ala = one.register(&unique("ala")).await;
    assert_eq!(
        two.get("/v1/me", Some(&ala.token)).await.status,
        StatusCode::OK
    );
    assert!(
        two.live.revocations().cached() >= 1,
        "cached on replica two"
    );

    allow_connections(&pool, false).await;
    assert_eq!(kill_listeners(&pool).await, 2);
    for _ in 0..200 {
        if !two.live.is_listening() && !one.live.is_listening() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!two.live.is_listening(), "replica two is not listening");
    // This notification reaches no replica.
    let revoked = one.delete("/v1/me/tokens", &ala.token).await;
    assert_eq!(revoked.status, StatusCode::OK);
    let new_token = revoked.body["token"].as_str().unwrap().to_owned();
    assert_eq!(
        two.get("/v1/me", Some(&ala.token)).await.status,
        StatusCode::UNAUTHORIZED,
        "not listening: the row is read"
    );
    assert_eq!(two.live.revocations().cached(), 0);

    allow_connections(&pool, true).await;
    for _ in 0..200 {
        if two.live.is_listening() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(two.live.is_listening(), "replica two listens again");
    assert_eq!(
        two.get("/v1/me", Some(&ala.token)).await.status,
        StatusCode::UNAUTHORIZED,
        "listening again: nothing stale was kept"
    );
    assert_eq!(
        two.get("/v1/me", Some(&new_token)).await.status,
        StatusCode::OK
    );
}

#[sqlx::test]
async fn revoking_ends_the_event_streams_opened_with_an_old_token(pool: PgPool) {
    let app = spawn_app(pool).await;
    listening(&app).await;
    let ala = app.register(&unique("ala")).await;
    let match_id = app.create_match(&ala, json!({})).await;
    let mut streams = Vec::new();
    for path in [
        "/v1/stream".to_owned(),
        format!("/v1/matches/{match_id}/stream"),
    ] {
        let response = app
            .client
            .get(app.url(&path))
            .bearer_auth(&ala.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        streams.push((path, response));
    }
    let revoked = app.delete("/v1/me/tokens", &ala.token).await;
    assert_eq!(revoked.status, StatusCode::OK);
    for (path, mut response) in streams {
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            while response.chunk().await.unwrap().is_some() {}
        })
        .await;
        assert!(ended.is_ok(), "{path} still open after the revocation");
    }
    let again = app.get("/v1/stream", Some(&ala.token)).await;
    assert_eq!(again.status, StatusCode::UNAUTHORIZED);
}
