//! HTTP as clients expect it: `ETag` and `If-None-Match` → 304, compression of larger JSON
//! answers (never of event streams), `RateLimit` headers on every limited answer, and the
//! CORS list of readable headers.

use crate::common;

use common::{TestApp, spawn_app, spawn_app_http, standard_settings, test_http_settings};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use statki::http::limits::RateLimitSettings;
use statki::live::HubSettings;

async fn get_tagged(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    tag: Option<&str>,
) -> reqwest::Response {
    let mut request = app.client.get(app.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(tag) = tag {
        request = request.header("if-none-match", tag);
    }
    request.send().await.unwrap()
}

fn etag(response: &reqwest::Response) -> String {
    response.headers()["etag"].to_str().unwrap().to_owned()
}

#[sqlx::test]
async fn a_match_view_is_tagged_by_its_sequence_number(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let path = format!("/v1/matches/{id}");

    let first = get_tagged(&app, &path, Some(&target.token), None).await;
    assert_eq!(first.status(), StatusCode::OK);
    let tag = etag(&first);
    assert_eq!(first.headers()["cache-control"], "private, no-cache");
    assert_eq!(first.headers()["vary"], "authorization");
    let view: Value = first.json().await.unwrap();
    assert!(tag.contains(&format!("\"{}-", view["seq"])), "{tag}");

    // Nothing happened: 304, no body, the same tag.
    let unchanged = get_tagged(&app, &path, Some(&target.token), Some(&tag)).await;
    assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(etag(&unchanged), tag);
    assert!(unchanged.bytes().await.unwrap().is_empty());

    // Another viewer of the same match has a view of their own, so a tag of their own.
    let watcher = app.register("watcher").await;
    let spectating = get_tagged(&app, &path, Some(&watcher.token), Some(&tag)).await;
    assert_eq!(spectating.status(), StatusCode::OK);
    assert_ne!(etag(&spectating), tag);

    // A shot moves the sequence number: the old tag no longer matches.
    let shot = app
        .post(
            &format!("/v1/matches/{id}/shots"),
            &shooter.token,
            json!({ "cell": "B2" }),
        )
        .await;
    assert_eq!(shot.status, StatusCode::OK);
    let changed = get_tagged(&app, &path, Some(&target.token), Some(&tag)).await;
    assert_eq!(changed.status(), StatusCode::OK);
    assert_ne!(etag(&changed), tag);
    let view: Value = changed.json().await.unwrap();
    assert_eq!(view["seq"], shot.body["seq"]);
}

#[sqlx::test]
async fn what_is_the_same_for_everyone_is_tagged_by_its_content(pool: PgPool) {
    let app = spawn_app(pool).await;
    for path in ["/v1/rulesets", "/v1/bots", "/openapi.yaml"] {
        let first = get_tagged(&app, path, None, None).await;
        assert_eq!(first.status(), StatusCode::OK, "{path}");
        let tag = etag(&first);
        assert_eq!(first.headers()["cache-control"], "public, max-age=300");
        let again = get_tagged(&app, path, None, Some(&tag)).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        let stale = get_tagged(&app, path, None, Some("\"0000\"")).await;
        assert_eq!(stale.status(), StatusCode::OK, "{path}");
        assert_eq!(etag(&stale), tag, "{path}: the same bytes, the same tag");
    }
}

#[sqlx::test]
async fn event_pages_profiles_and_the_ladder_are_revalidated_by_their_content(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let events = format!("/v1/matches/{id}/events");
    let profile = format!("/v1/players/{}", target.id);
    let ladder = "/v1/ladder/statki";
    let first_ladder = get_tagged(&app, ladder, None, None).await;
    assert_eq!(first_ladder.headers()["cache-control"], "public, no-cache");
    let ladder_tag = etag(&first_ladder);
    let unchanged = get_tagged(&app, ladder, None, Some(&ladder_tag)).await;
    assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);
    let first_events = get_tagged(&app, &events, Some(&target.token), None).await;
    assert_eq!(first_events.status(), StatusCode::OK);
    assert_eq!(first_events.headers()["cache-control"], "private, no-cache");
    let events_tag = etag(&first_events);
    let first_profile = get_tagged(&app, &profile, None, None).await;
    assert_eq!(first_profile.status(), StatusCode::OK);
    assert_eq!(first_profile.headers()["cache-control"], "public, no-cache");
    let profile_tag = etag(&first_profile);

    let unchanged = get_tagged(&app, &events, Some(&target.token), Some(&events_tag)).await;
    assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);
    let unchanged = get_tagged(&app, &profile, None, Some(&profile_tag)).await;
    assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);

    // A new event changes the page; the match ending changes the profile's record.
    let resigned = app
        .post(
            &format!("/v1/matches/{id}/resign"),
            &shooter.token,
            json!({}),
        )
        .await;
    assert_eq!(resigned.status, StatusCode::OK);
    let changed = get_tagged(&app, &events, Some(&target.token), Some(&events_tag)).await;
    assert_eq!(changed.status(), StatusCode::OK);
    assert_ne!(etag(&changed), events_tag);
    let changed = get_tagged(&app, &profile, None, Some(&profile_tag)).await;
    assert_eq!(changed.status(), StatusCode::OK);
    assert_ne!(etag(&changed), profile_tag);
}

#[sqlx::test]
async fn larger_json_answers_are_compressed_and_streams_never(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let plain: Value = app.get("/v1/rulesets", None).await.body;
    let plain_size = serde_json::to_vec(&plain).unwrap().len();
    assert!(
        plain_size > 1024,
        "the rulesets answer is {plain_size} bytes"
    );

    let gzipped = app
        .client
        .get(app.url("/v1/rulesets"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.headers()["content-encoding"], "gzip");
    let packed = gzipped.bytes().await.unwrap();
    let text = common::gunzip(&packed);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), plain);
    assert!(
        packed.len() < plain_size / 2,
        "{} of {plain_size}",
        packed.len()
    );

    let brotli = app
        .client
        .get(app.url("/v1/rulesets"))
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();
    assert_eq!(brotli.headers()["content-encoding"], "br");

    // A small answer is sent as it is.
    let small = app
        .client
        .get(app.url("/v1/me"))
        .bearer_auth(&ala.token)
        .header("accept-encoding", "gzip, br")
        .send()
        .await
        .unwrap();
    assert_eq!(small.status(), StatusCode::OK);
    assert!(small.headers().get("content-encoding").is_none());

    // An event stream never is: each event must reach the client when it is written.
    let id = app.create_match(&ala, json!({})).await;
    let stream = app
        .client
        .get(app.url(&format!("/v1/matches/{id}/stream?after=0")))
        .bearer_auth(&ala.token)
        .header("accept-encoding", "gzip, br")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(stream.headers().get("content-encoding").is_none());
}

/// `"name";r=<left>;t=<seconds>` → (name, left).
fn standing(response: &reqwest::Response) -> (String, u64) {
    let value = response.headers()["ratelimit"].to_str().unwrap().to_owned();
    let (name, rest) = value
        .trim_start_matches('"')
        .split_once("\";r=")
        .unwrap_or_else(|| panic!("RateLimit: {value}"));
    let left = rest.split(';').next().unwrap().parse().unwrap();
    (name.to_owned(), left)
}

#[sqlx::test]
async fn every_limited_answer_says_where_the_caller_stands(pool: PgPool) {
    let limits = RateLimitSettings {
        player: statki::http::limits::Rate::per_minute(60, 5),
        ..RateLimitSettings::default()
    };
    let app = spawn_app_http(
        pool,
        standard_settings(),
        HubSettings::default(),
        statki::http::HttpSettings {
            rate_limits: Some(limits),
            ..test_http_settings()
        },
    )
    .await;
    let ala = app.register("Ala").await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        let response = get_tagged(&app, "/v1/me", Some(&ala.token), None).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["ratelimit-policy"], "\"player\";q=5;w=5");
        seen.push(standing(&response));
    }
    // The tightest limit is the player's, and its room shrinks by one a request.
    assert_eq!(
        seen,
        (0..5)
            .rev()
            .map(|left| ("player".to_owned(), left))
            .collect::<Vec<_>>()
    );
    let refused = get_tagged(&app, "/v1/me", Some(&ala.token), None).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(standing(&refused), ("player".to_owned(), 0));

    // Without a token the address limit is the one reported.
    let anonymous = get_tagged(&app, "/v1/rulesets", None, None).await;
    assert_eq!(standing(&anonymous).0, "address");
    // A refusal the limiter saw says where the caller stands too (openapi.yaml declares the
    // headers on every answer but 408 and 431).
    let missing = get_tagged(
        &app,
        &format!("/v1/players/{}", uuid::Uuid::now_v7()),
        None,
        None,
    )
    .await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(standing(&missing).0, "address");
    // Probes are not limited, so they say nothing.
    let probe = get_tagged(&app, "/healthz", None, None).await;
    assert!(probe.headers().get("ratelimit").is_none());
}

#[sqlx::test]
async fn browsers_may_read_exactly_the_headers_sent(pool: PgPool) {
    let app = spawn_app(pool).await;
    let response = app
        .client
        .get(app.url("/v1/rulesets"))
        .header("origin", "https://play.example")
        .send()
        .await
        .unwrap();
    let exposed = response.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    let mut exposed: Vec<&str> = exposed.split(',').map(str::trim).collect();
    exposed.sort_unstable();
    assert_eq!(
        exposed,
        [
            "etag",
            "location",
            "ratelimit",
            "ratelimit-policy",
            "retry-after",
            "www-authenticate",
            "x-request-id"
        ]
    );
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/v1/me"))
        .header("origin", "https://play.example")
        .header("access-control-request-method", "GET")
        .header(
            "access-control-request-headers",
            "authorization, if-none-match",
        )
        .send()
        .await
        .unwrap();
    let allowed = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(allowed.contains("if-none-match"), "{allowed}");
}
