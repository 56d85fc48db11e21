//! Refusals every operation may meet, each a coded problem: a slow answer (408), an
//! oversized request head (431); and `Idempotency-Key` on the rematch and token refresh.

use crate::common;

use std::time::Duration;

use common::{Reply, TestApp, spawn_app, spawn_app_http, standard_settings, test_http_settings};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use statki::live::HubSettings;

async fn post_keyed(app: &TestApp, path: &str, token: &str, key: &str) -> Reply {
    app.send(
        app.client
            .post(app.url(path))
            .bearer_auth(token)
            .header("idempotency-key", key)
            .json(&json!({})),
    )
    .await
}

#[sqlx::test]
async fn a_slow_answer_is_a_coded_408(pool: PgPool) {
    let app = spawn_app_http(
        pool,
        standard_settings(),
        HubSettings::default(),
        statki::http::HttpSettings {
            request_timeout: Some(Duration::from_millis(1)),
            ..test_http_settings()
        },
    )
    .await;
    // Hashing a password takes far longer than a millisecond.
    let reply = app
        .send(
            app.client
                .post(app.url("/v1/players"))
                .json(&json!({ "name": "Ala", "password": "correct horse battery" })),
        )
        .await;
    assert_eq!(reply.status, StatusCode::REQUEST_TIMEOUT);
    assert_eq!(reply.content_type, "application/problem+json");
    assert_eq!(reply.code(), "request_timeout");
    assert_eq!(reply.body["status"], 408);
}

#[sqlx::test]
async fn an_oversized_request_head_is_a_coded_431(pool: PgPool) {
    let app = spawn_app(pool).await;
    let with_filler = |bytes: usize| {
        app.send(
            app.client
                .get(app.url("/v1/rulesets"))
                .header("x-filler", "a".repeat(bytes)),
        )
    };
    let large = with_filler(40 * 1024).await;
    assert_eq!(large.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(large.content_type, "application/problem+json");
    assert_eq!(large.code(), "headers_too_large");
    let fitting = with_filler(20 * 1024).await;
    assert_eq!(fitting.status, StatusCode::OK);
}

#[sqlx::test]
async fn a_retried_rematch_ask_answers_the_first_answer(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, ala, bolek) = app.battle_match("statki").await;
    let resigned = app
        .post(&format!("/v1/matches/{id}/resign"), &bolek.token, json!({}))
        .await;
    assert_eq!(resigned.status, StatusCode::OK);
    let path = format!("/v1/matches/{id}/rematch");

    let first = post_keyed(&app, &path, &ala.token, "rematch-1").await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    assert_eq!(first.body["status"], "offered");
    tokio::time::sleep(Duration::from_millis(5)).await;
    // The retry renews nothing: the same offer, expiring at the same instant.
    let retry = post_keyed(&app, &path, &ala.token, "rematch-1").await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.body, first.body);
    // A new ask (another key) does renew the offer.
    let renewed = post_keyed(&app, &path, &ala.token, "rematch-2").await;
    assert_eq!(renewed.status, StatusCode::OK);
    assert!(
        renewed.body["offers"][0]["expires_at"].as_str().unwrap()
            > first.body["offers"][0]["expires_at"].as_str().unwrap()
    );
    // The key belongs to that request: used for another, it is refused.
    let reused = post_keyed(&app, "/v1/me/token", &ala.token, "rematch-1").await;
    assert_eq!(
        (reused.status, reused.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
    let malformed = post_keyed(&app, &path, &ala.token, "two words").await;
    assert_eq!(
        (malformed.status, malformed.code()),
        (StatusCode::BAD_REQUEST, "invalid_idempotency_key")
    );

    // Bolek accepts; his retry answers the same started rematch and starts no other.
    let started = post_keyed(&app, &path, &bolek.token, "accept").await;
    assert_eq!(started.body["status"], "started");
    let again = post_keyed(&app, &path, &bolek.token, "accept").await;
    assert_eq!(again.body, started.body);
}

#[sqlx::test]
async fn a_retried_token_refresh_answers_the_same_token(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let first = post_keyed(&app, "/v1/me/token", &ala.token, "refresh-1").await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let retry = post_keyed(&app, "/v1/me/token", &ala.token, "refresh-1").await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.body, first.body);
    let other = post_keyed(&app, "/v1/me/token", &ala.token, "refresh-2").await;
    assert_ne!(other.body["token"], first.body["token"]);
    // The replayed token works.
    let me = app
        .get("/v1/me", Some(first.body["token"].as_str().unwrap()))
        .await;
    assert_eq!(me.status, StatusCode::OK);
    let malformed = post_keyed(&app, "/v1/me/token", &ala.token, "").await;
    assert_eq!(
        (malformed.status, malformed.code()),
        (StatusCode::BAD_REQUEST, "invalid_idempotency_key")
    );
}
