//! Abuse resistance: each test tries one attack and checks it is refused cleanly.

use crate::common;

use std::time::Duration;

use common::{
    SECRET, TestApp, on_citus, spawn_app, spawn_app_http, standard_settings, test_http_settings,
    unique,
};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use statki::auth::{AUDIENCE, Claims, ISSUER, Tokens};
use statki::http::MetricsAccess;
use statki::http::limits::{Rate, RateLimitSettings};
use statki::live::HubSettings;

async fn spawn_limited(pool: PgPool, limits: RateLimitSettings) -> TestApp {
    spawn_app_http(
        pool,
        standard_settings(),
        HubSettings::default(),
        statki::http::HttpSettings {
            rate_limits: Some(limits),
            ..test_http_settings()
        },
    )
    .await
}

async fn register_raw(app: &TestApp, name: &str, forwarded_for: Option<&str>) -> reqwest::Response {
    let mut request = app
        .client
        .post(app.url("/v1/players"))
        .json(&json!({ "name": name }));
    if let Some(address) = forwarded_for {
        request = request.header("x-forwarded-for", address);
    }
    request.send().await.unwrap()
}

#[sqlx::test]
async fn a_registration_flood_is_rate_limited_and_a_forged_forwarded_for_does_not_help(
    pool: PgPool,
) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(10, 5),
            ..RateLimitSettings::default()
        },
    )
    .await;
    let mut created = 0;
    let mut limited = Vec::new();
    for i in 0..20 {
        // Each request claims another client address; none is trusted.
        let response = register_raw(&app, &unique("flood"), Some(&format!("203.0.113.{i}"))).await;
        match response.status() {
            StatusCode::CREATED => created += 1,
            StatusCode::TOO_MANY_REQUESTS => limited.push(response),
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(created, 5, "the burst, then the sustained rate");
    assert_eq!(limited.len(), 15);
    let refused = limited.pop().unwrap();
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=6).contains(&retry_after), "{retry_after}");
    assert!(refused.headers().contains_key("ratelimit-policy"));
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "rate_limited");
    let players: i64 = sqlx::query_scalar("SELECT count(*) FROM players WHERE bot_level IS NULL")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(players, 5, "a refused registration stores nothing");
}

#[sqlx::test]
async fn behind_a_trusted_balancer_each_client_address_has_its_own_budget(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(1, 1),
            trusted_proxy_header: Some("x-forwarded-for".parse().unwrap()),
            ..RateLimitSettings::default()
        },
    )
    .await;
    // The balancer appends the address it saw; what the client wrote before it is ignored.
    let first = register_raw(&app, &unique("a"), Some("10.0.0.1, 198.51.100.1")).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let again = register_raw(&app, &unique("a"), Some("10.0.0.2, 198.51.100.1")).await;
    assert_eq!(again.status(), StatusCode::TOO_MANY_REQUESTS);
    let other = register_raw(&app, &unique("b"), Some("198.51.100.2")).await;
    assert_eq!(other.status(), StatusCode::CREATED);
}

#[sqlx::test]
async fn an_ipv6_48_rotating_through_its_64s_shares_one_wider_budget(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            login: Rate::per_minute(1, 1),
            register: Rate::per_minute(1, 1),
            trusted_proxy_header: Some("x-forwarded-for".parse().unwrap()),
            ..RateLimitSettings::default()
        },
    )
    .await;
    // A new unknown name every time, so no account's own back-off answers.
    let log_in = |address: String| {
        app.client
            .post(app.url("/v1/sessions"))
            .header("x-forwarded-for", address)
            .json(&json!({ "name": unique("nobody"), "password": "whatever it is" }))
            .send()
    };
    // One /48, a new /64 for every attempt: each /64 has a budget of 1, the /48 of 8.
    let mut passed = 0;
    for n in 0..40 {
        let answer = log_in(format!("2001:db8:1:{n:x}::1")).await.unwrap();
        match answer.status() {
            StatusCode::UNAUTHORIZED => passed += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                let policy = answer.headers()["ratelimit-policy"].to_str().unwrap();
                assert!(policy.starts_with("\"login_network\""), "{n}: {policy}");
            }
            other => panic!("unexpected {other}"),
        }
    }
    let factor = statki::http::limits::NETWORK_FACTOR as usize;
    assert_eq!(passed, factor, "the /48 got {passed} attempts");
    // Another /48 is another budget; IPv4 addresses are keyed alone as before.
    let other = log_in("2001:db8:2::1".into()).await.unwrap();
    assert_eq!(other.status(), StatusCode::UNAUTHORIZED);
    let v4 = log_in("198.51.100.77".into()).await.unwrap();
    assert_eq!(v4.status(), StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn a_player_over_their_rate_is_limited_and_others_are_not(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(100, 100),
            player: Rate::per_minute(1, 5),
            ..RateLimitSettings::default()
        },
    )
    .await;
    let greedy = app.register(&unique("greedy")).await;
    let calm = app.register(&unique("calm")).await;
    for _ in 0..5 {
        let reply = app
            .get("/v1/matches?status=open", Some(&greedy.token))
            .await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    let refused = app
        .get("/v1/matches?status=open", Some(&greedy.token))
        .await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.code(), "rate_limited");
    let created = app.post("/v1/matches", &greedy.token, json!({})).await;
    assert_eq!(created.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        app.event_count().await,
        0,
        "a limited command changes nothing"
    );
    let other = app.get("/v1/matches?status=open", Some(&calm.token)).await;
    assert_eq!(other.status, StatusCode::OK);
}

#[sqlx::test]
async fn a_player_cannot_hold_more_than_the_cap_of_open_matches(pool: PgPool) {
    let mut settings = standard_settings();
    settings.open_matches_per_player = 3;
    let app = common::spawn_app_with(pool, settings).await;
    let hoarder = app.register("hoarder").await;
    let opponent = app.register("opponent").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(app.create_match(&hoarder, json!({})).await);
    }
    let refused = app.post("/v1/matches", &hoarder.token, json!({})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.code(), "too_many_open_matches");
    let challenge = app
        .post(
            "/v1/matches",
            &hoarder.token,
            json!({ "opponent": opponent.id }),
        )
        .await;
    assert_eq!(
        challenge.code(),
        "too_many_open_matches",
        "challenges count"
    );
    // Once one is joined, there is room for another.
    let joined = app
        .post(
            &format!("/v1/matches/{}/join", ids[0]),
            &opponent.token,
            json!({}),
        )
        .await;
    assert_eq!(joined.status, StatusCode::OK);
    app.create_match(&hoarder, json!({})).await;
    let open = app
        .get("/v1/matches?status=open", Some(&opponent.token))
        .await;
    assert_eq!(open.body["matches"].as_array().unwrap().len(), 3);
}

#[sqlx::test]
async fn concurrent_creations_cannot_slip_past_the_open_match_cap(pool: PgPool) {
    let mut settings = standard_settings();
    settings.open_matches_per_player = 2;
    let app = common::spawn_app_with(pool, settings).await;
    let hoarder = app.register("hoarder").await;
    let replies = futures::future::join_all(
        (0..10).map(|_| app.post("/v1/matches", &hoarder.token, json!({}))),
    )
    .await;
    let created = replies
        .iter()
        .filter(|reply| reply.status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 2);
    assert!(
        replies
            .iter()
            .filter(|reply| reply.status != StatusCode::CREATED)
            .all(|reply| reply.code() == "too_many_open_matches")
    );
}

#[sqlx::test]
async fn look_alike_names_cannot_coexist(pool: PgPool) {
    let app = spawn_app(pool).await;
    app.register("Ala").await;
    for look_alike in ["ALA", "\u{0410}la", "\u{FF21}la", "A\u{217C}a"] {
        let reply = app
            .send(
                app.client
                    .post(app.url("/v1/players"))
                    .json(&json!({ "name": look_alike })),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CONFLICT, "{look_alike:?}");
        assert_eq!(reply.code(), "name_taken");
    }
    for hidden in [
        "Bo\u{200B}lek",
        "Bolek\u{202E}",
        "\u{2067}Bolek",
        "Bo\u{00AD}lek",
    ] {
        let reply = app
            .send(
                app.client
                    .post(app.url("/v1/players"))
                    .json(&json!({ "name": hidden })),
            )
            .await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{hidden:?}");
        assert_eq!(reply.code(), "invalid_name");
    }
    let wide = app
        .send(
            app.client
                .post(app.url("/v1/players"))
                .json(&json!({ "name": "\u{FF23}elina" })),
        )
        .await;
    assert_eq!(wide.status, StatusCode::CREATED);
    assert_eq!(wide.body["name"], "Celina", "stored in NFKC form");
}

#[sqlx::test]
async fn every_answer_is_nosniff_and_token_answers_are_not_cached(pool: PgPool) {
    let app = spawn_app(pool).await;
    let registered = app
        .client
        .post(app.url("/v1/players"))
        .json(&json!({ "name": "Ala" }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), StatusCode::CREATED);
    assert_eq!(registered.headers()["x-content-type-options"], "nosniff");
    assert_eq!(registered.headers()["cache-control"], "no-store");
    for path in ["/v1/nowhere", "/healthz", "/v1/rulesets"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(
            response.headers()["x-content-type-options"],
            "nosniff",
            "{path}"
        );
    }
}

#[sqlx::test]
async fn problems_never_carry_library_internals(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let forged = Tokens::new(b"another-secret-that-is-at-least-32-bytes")
        .unwrap()
        .mint(ala.id.parse().unwrap(), chrono::Utc::now())
        .unwrap();
    let reply = app.get("/v1/matches?status=open", Some(&forged)).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let mut details = vec![reply.body["detail"].as_str().unwrap().to_owned()];
    for body in [r#"{"name": "#, r#"{"name": 5}"#, r#"{"nam": "x"}"#] {
        let reply = app
            .send(
                app.client
                    .post(app.url("/v1/players"))
                    .header("content-type", "application/json")
                    .body(body),
            )
            .await;
        assert!(reply.status.is_client_error(), "{body}");
        details.push(reply.body["detail"].as_str().unwrap().to_owned());
    }
    let reply = app.get("/v1/matches/not-a-uuid", Some(&ala.token)).await;
    assert_eq!(reply.code(), "invalid_path");
    details.push(reply.body["detail"].as_str().unwrap().to_owned());
    for detail in &details {
        for internal in [
            "InvalidSignature",
            "line 1",
            "column",
            "Failed to",
            "UUID parsing",
        ] {
            assert!(
                !detail.contains(internal),
                "{detail:?} carries {internal:?}"
            );
        }
    }
}

#[sqlx::test]
async fn a_token_not_yet_valid_or_oversized_is_refused(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let now = chrono::Utc::now().timestamp();
    let early = Tokens::new(SECRET)
        .unwrap()
        .sign(&Claims {
            sub: ala.id.parse().unwrap(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            iat: Some(now as f64),
            exp: now + 3600,
            nbf: Some(now + 600),
        })
        .unwrap();
    let reply = app.get("/v1/matches?status=open", Some(&early)).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(
        reply.body["detail"]
            .as_str()
            .unwrap()
            .contains("not valid yet")
    );
    let huge = format!("{}.{}", ala.token, "A".repeat(8 * 1024));
    let reply = app.get("/v1/matches?status=open", Some(&huge)).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn a_stream_cursor_at_the_largest_number_is_refused(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    for (header, query, code) in [
        (Some(i64::MAX.to_string()), "", "invalid_last_event_id"),
        (
            Some("9007199254740992".to_owned()),
            "",
            "invalid_last_event_id",
        ),
        (Some("-1".to_owned()), "", "invalid_last_event_id"),
        (None, "?after=9223372036854775807", "invalid_query"),
        (None, "?after=-5", "invalid_query"),
    ] {
        let mut request = app
            .client
            .get(app.url(&format!("/v1/stream{query}")))
            .bearer_auth(&ala.token);
        if let Some(header) = &header {
            request = request.header("last-event-id", header);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["code"], code, "{header:?} {query}");
    }
}

#[sqlx::test]
async fn an_idempotency_key_with_a_space_is_refused_as_its_message_says(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let reply = app
        .send(
            app.client
                .post(app.url("/v1/matches"))
                .bearer_auth(&ala.token)
                .header("idempotency-key", "two words")
                .json(&json!({})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.code(), "invalid_idempotency_key");
    assert_eq!(app.event_count().await, 0);
}

#[sqlx::test]
async fn idempotency_keys_expire_and_are_purged(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let create = |key: &'static str, body: serde_json::Value| {
        app.send(
            app.client
                .post(app.url("/v1/matches"))
                .bearer_auth(&ala.token)
                .header("idempotency-key", key)
                .json(&body),
        )
    };
    let first = create("old-key", json!({})).await;
    assert_eq!(first.status, StatusCode::CREATED);
    create("fresh-key", json!({})).await;
    // A day and a bit later, the old key is forgotten: reusing it is a new request.
    sqlx::query(
        "UPDATE idempotency_keys SET created_at = created_at - interval '25 hours'
         WHERE key = 'old-key'",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let reused = create("old-key", json!({ "ruleset": "classic" })).await;
    assert_eq!(reused.status, StatusCode::CREATED, "{:?}", reused.body);
    assert_ne!(reused.body["id"], first.body["id"]);

    sqlx::query(
        "UPDATE idempotency_keys SET created_at = created_at - interval '25 hours'
         WHERE key = 'old-key'",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let now = statki::store::now(&app.pool).await.unwrap();
    let purged = statki::housekeeping::purge_expired_keys(&app.pool, now)
        .await
        .unwrap();
    assert_eq!(purged, 1);
    let keys: Vec<String> = sqlx::query_scalar("SELECT key FROM idempotency_keys")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(keys, ["fresh-key"]);
    // Driven a day ahead, the step purges the rest.
    let later = now + chrono::Duration::hours(25);
    assert_eq!(
        statki::housekeeping::purge_expired_keys(&app.pool, later)
            .await
            .unwrap(),
        1
    );
}

#[sqlx::test]
async fn a_database_connection_lost_mid_request_answers_503(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (id, first, _) = app.battle_match("statki").await;
    // Hold the match row, so the shot waits on it inside the database...
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM matches WHERE id = $1::uuid FOR UPDATE")
        .bind(&id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let shot = {
        let app_url = app.url(&format!("/v1/matches/{id}/shots"));
        let client = app.client.clone();
        let token = first.token.clone();
        tokio::spawn(async move {
            client
                .post(app_url)
                .bearer_auth(token)
                .json(&json!({ "cell": "A1" }))
                .send()
                .await
                .unwrap()
        })
    };
    // ...then terminate the connection it waits on. On Citus the wait is on the match's
    // worker, in the backend the coordinator opened there for the shot's transaction; its
    // global process id names the service's connection to the coordinator, which Citus's
    // `pg_terminate_backend(bigint)` terminates.
    let waiting = if on_citus(&pool).await {
        "SELECT pg_terminate_backend(global_pid) FROM citus_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'"
    } else {
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'"
    };
    let mut terminated = false;
    for _ in 0..100 {
        let killed: Vec<bool> = sqlx::query_scalar(waiting).fetch_all(&pool).await.unwrap();
        if killed.iter().any(|k| *k) {
            terminated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(terminated, "the shot never waited on the row");
    holder.rollback().await.unwrap();
    let response = shot.await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["code"], "unavailable");
    let shots: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM match_events WHERE match_id = $1::uuid AND kind = 'shot_fired'",
    )
    .bind(&id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(shots, 0, "nothing was stored");
}

#[sqlx::test]
async fn metrics_can_require_a_token_and_never_wait_for_the_database(pool: PgPool) {
    let app = spawn_app_http(
        pool,
        standard_settings(),
        HubSettings::default(),
        statki::http::HttpSettings {
            metrics_access: MetricsAccess::Token("scrape-token".into()),
            ..test_http_settings()
        },
    )
    .await;
    let anonymous = app.get("/metrics", None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let scraped = app.get("/metrics", Some("scrape-token")).await;
    assert_eq!(scraped.status, StatusCode::OK);

    // A replica whose database does not answer still answers a scrape at once.
    let dead = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy("postgres://postgres@127.0.0.1:1/none")
        .unwrap();
    let core = statki::app::App::new(
        dead.clone(),
        standard_settings(),
        Tokens::new(SECRET).unwrap(),
    );
    let live = statki::live::Hub::start(&dead, Default::default());
    let router = statki::http::app(statki::http::state(core, live), &test_http_settings());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let scrape = reqwest::Client::new()
        .get(format!("http://{address}/metrics"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .expect("answered without waiting for the database");
    assert_eq!(scrape.status(), StatusCode::OK);
}

#[test]
fn a_weak_secret_stops_the_start_up_with_a_clear_message() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_statki"))
        .env("STATKI_JWT_SECRET", "short-secret")
        .env(
            "DATABASE_URL",
            "postgres://postgres@127.0.0.1:1/never-reached",
        )
        .env("STATKI_LISTEN", "127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("STATKI_JWT_SECRET"), "{stderr}");
    assert!(stderr.contains("at least 32"), "{stderr}");
}

#[test]
fn a_published_placeholder_secret_stops_the_start_up() {
    // The value `.env.example` shipped until now: long enough, and public.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_statki"))
        .env(
            "STATKI_JWT_SECRET",
            "change-me-to-64-random-hex-digits-change-me-to-64-random-hex-digits",
        )
        .env(
            "DATABASE_URL",
            "postgres://postgres@127.0.0.1:1/never-reached",
        )
        .env("STATKI_LISTEN", "127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("published placeholder"), "{stderr}");
    for placeholder in [
        "Change_Me-please-with-something-32-bytes-long",
        "replace me with a secret of at least 32 bytes",
        "a-test-secret-of-at-least-32-bytes",
    ] {
        assert!(
            statki::auth::configured_secret(placeholder).is_err(),
            "{placeholder}"
        );
    }
    let random = hex::encode(rand::random::<[u8; 32]>());
    assert!(statki::auth::configured_secret(&random).is_ok());
}

/// Every `STATKI_JWT_SECRET` value the repository's deploy files and documentation spell out
/// is refused: what ships must not be a usable secret.
#[test]
fn no_secret_the_repository_ships_is_accepted() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join(".env.example"),
        root.join("docker-compose.yml"),
        root.join("README.md"),
    ];
    for folder in ["docs", "deploy"] {
        for entry in std::fs::read_dir(root.join(folder)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    for file in files.iter().filter(|f| f.is_file()) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines() {
            let Some((_, rest)) = line.split_once("STATKI_JWT_SECRET=") else {
                continue;
            };
            let value = rest
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches(|c| c == '"' || c == '\'' || c == '`');
            // Empty, or taken from elsewhere (`$(…)`, `${…}`): nothing to reuse.
            if value.is_empty() || value.starts_with('$') || value.starts_with('<') {
                continue;
            }
            assert!(
                statki::auth::configured_secret(value).is_err(),
                "{} ships the usable secret {value:?}",
                file.display()
            );
        }
    }
    // The old `.env.example` line, kept here so the scan itself is exercised.
    assert!(
        statki::auth::configured_secret(
            "change-me-to-64-random-hex-digits-change-me-to-64-random-hex-digits"
        )
        .is_err()
    );
}

mod connections {
    use std::time::{Duration, Instant};

    use statki::http::server::ConnectionSettings;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    async fn spawn_with(pool: PgPool, connections: ConnectionSettings) -> TestApp {
        common::spawn_app_served(
            pool,
            standard_settings(),
            HubSettings {
                keep_alive: Duration::from_millis(200),
                ..HubSettings::default()
            },
            test_http_settings(),
            connections,
        )
        .await
    }

    fn settings() -> ConnectionSettings {
        ConnectionSettings {
            header_read_timeout: Duration::from_millis(800),
            idle_timeout: Duration::from_millis(1500),
            max_connections: 100,
            ..ConnectionSettings::default()
        }
    }

    async fn connect(app: &TestApp) -> TcpStream {
        TcpStream::connect(app.address.trim_start_matches("http://"))
            .await
            .unwrap()
    }

    /// Reads until the server closes the connection; returns when it did, or panics
    /// after `limit`.
    async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Duration {
        let started = Instant::now();
        let mut buffer = [0u8; 4096];
        loop {
            match tokio::time::timeout_at(
                tokio::time::Instant::from_std(started + limit),
                stream.read(&mut buffer),
            )
            .await
            {
                Ok(Ok(0) | Err(_)) => return started.elapsed(),
                Ok(Ok(_)) => {}
                Err(_) => panic!("still open after {limit:?}"),
            }
        }
    }

    #[sqlx::test]
    async fn a_client_sending_half_a_header_is_dropped(pool: PgPool) {
        let app = spawn_with(pool, settings()).await;
        let mut slow = connect(&app).await;
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: statki\r\n")
            .await
            .unwrap();
        let took = closed_within(&mut slow, Duration::from_secs(5)).await;
        assert!(took >= Duration::from_millis(500), "{took:?}");
        // A silent connection owes its first request head just the same.
        let mut silent = connect(&app).await;
        closed_within(&mut silent, Duration::from_secs(5)).await;
    }

    #[sqlx::test]
    async fn an_idle_keep_alive_connection_is_closed_and_a_busy_one_is_not(pool: PgPool) {
        let app = spawn_with(pool, settings()).await;
        let mut idle = connect(&app).await;
        idle.write_all(b"GET /v1/rulesets HTTP/1.1\r\nHost: statki\r\n\r\n")
            .await
            .unwrap();
        let mut buffer = [0u8; 1024];
        let read = idle.read(&mut buffer).await.unwrap();
        assert!(String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"));
        let took = closed_within(&mut idle, Duration::from_secs(5)).await;
        assert!(took >= Duration::from_millis(1200), "{took:?}");

        // Requests every half second keep a connection open past the idle timeout.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        for _ in 0..6 {
            let response = client.get(app.url("/v1/rulesets")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    #[sqlx::test]
    async fn an_event_stream_outlives_the_idle_timeout(pool: PgPool) {
        let app = spawn_with(pool, settings()).await;
        let ala = app.register("Ala").await;
        let mut response = app
            .client
            .get(app.url("/v1/stream"))
            .bearer_auth(&ala.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let started = Instant::now();
        let mut received = 0;
        while started.elapsed() < Duration::from_secs(4) {
            let chunk = tokio::time::timeout(Duration::from_secs(2), response.chunk())
                .await
                .expect("the stream keeps talking")
                .expect("the stream is open")
                .expect("the stream did not end");
            received += chunk.len();
        }
        assert!(received > 0);
    }

    #[sqlx::test]
    async fn connections_beyond_the_cap_are_closed_at_once(pool: PgPool) {
        let app = spawn_with(
            pool,
            ConnectionSettings {
                max_connections: 2,
                header_read_timeout: Duration::from_secs(30),
                idle_timeout: Duration::from_secs(30),
                ..ConnectionSettings::default()
            },
        )
        .await;
        let first = connect(&app).await;
        let _second = connect(&app).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut third = connect(&app).await;
        closed_within(&mut third, Duration::from_secs(2)).await;
        drop(first);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut fourth = connect(&app).await;
        fourth
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: statki\r\n\r\n")
            .await
            .unwrap();
        let mut buffer = [0u8; 1024];
        let read = fourth.read(&mut buffer).await.unwrap();
        assert!(String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"));
    }

    #[sqlx::test]
    async fn one_address_cannot_take_every_connection(pool: PgPool) {
        let app = spawn_with(
            pool,
            ConnectionSettings {
                max_connections: 100,
                max_connections_per_address: 3,
                header_read_timeout: Duration::from_secs(30),
                idle_timeout: Duration::from_secs(30),
            },
        )
        .await;
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(connect(&app).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut fourth = connect(&app).await;
        closed_within(&mut fourth, Duration::from_secs(2)).await;
        drop(held.pop());
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut again = connect(&app).await;
        again
            .write_all(b"GET /v1/rulesets HTTP/1.1\r\nHost: statki\r\n\r\n")
            .await
            .unwrap();
        let mut buffer = [0u8; 64];
        let read = again.read(&mut buffer).await.unwrap();
        assert!(String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"));
    }

    #[sqlx::test]
    async fn a_probe_does_not_keep_its_connection(pool: PgPool) {
        let app = spawn_with(pool, settings()).await;
        let mut probe = connect(&app).await;
        probe
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: statki\r\n\r\n")
            .await
            .unwrap();
        let took = closed_within(&mut probe, Duration::from_secs(1)).await;
        assert!(took < Duration::from_millis(500), "{took:?}");
    }
}

#[sqlx::test]
async fn the_per_player_stream_cap_holds_across_replicas(pool: PgPool) {
    let live = HubSettings {
        streams_per_player: 2,
        ..HubSettings::default()
    };
    let one = common::spawn_app_full(pool.clone(), standard_settings(), live.clone()).await;
    let two = common::spawn_app_full(pool, standard_settings(), live).await;
    let ala = one.register("Ala").await;
    let open = |app: &TestApp| {
        app.client
            .get(app.url("/v1/stream"))
            .bearer_auth(&ala.token)
            .send()
    };
    let first = open(&one).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let second = open(&two).await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);
    for app in [&one, &two] {
        let refused = open(app).await.unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["code"], "too_many_streams");
    }
    // Closing a stream on one replica makes room on the other.
    drop(first);
    let mut reopened = None;
    for _ in 0..50 {
        let response = open(&two).await.unwrap();
        if response.status() == StatusCode::OK {
            reopened = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        reopened.is_some(),
        "the closed stream's lease was given back"
    );
}

// Second round: what an attacker still broke.

/// Runs `sql` as the read-only auditor role.
async fn as_auditor(
    pool: &PgPool,
    sql: &'static str,
) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL ROLE statki_auditor")
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query(sql).fetch_all(&mut *tx).await;
    // A notification is delivered at commit.
    tx.commit().await?;
    rows
}

#[sqlx::test]
async fn a_forged_revocation_notice_locks_nobody_out(pool: PgPool) {
    let app = spawn_app(pool).await;
    let victim = app.register(&unique("victim")).await;
    let other = app.register(&unique("other")).await;
    assert_eq!(
        app.get("/v1/me", Some(&victim.token)).await.status,
        StatusCode::OK
    );
    as_auditor(
        &app.pool,
        "SELECT pg_notify('statki_tokens', id || ':9007199254740991000') FROM players",
    )
    .await
    .expect("any role may notify");
    // A real revocation after it: once it is acknowledged, the forged notices (sent first,
    // on the same channel) have been handled too.
    let revoked = app.delete("/v1/me/tokens", &other.token).await;
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
    for _ in 0..10 {
        let me = app.get("/v1/me", Some(&victim.token)).await;
        assert_eq!(me.status, StatusCode::OK, "{:?}", me.body);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let fresh = revoked.body["token"].as_str().unwrap();
    assert_eq!(app.get("/v1/me", Some(fresh)).await.status, StatusCode::OK);
    assert_eq!(
        app.get("/v1/me", Some(&other.token)).await.status,
        StatusCode::UNAUTHORIZED,
        "the real revocation still holds"
    );
}

#[sqlx::test]
async fn a_deleted_players_cached_token_stops_at_once(pool: PgPool) {
    let app = spawn_app(pool).await;
    let gone = app.register(&unique("gone")).await;
    // Cached by this replica.
    assert_eq!(
        app.get("/v1/me", Some(&gone.token)).await.status,
        StatusCode::OK
    );
    let id: uuid::Uuid = gone.id.parse().unwrap();
    sqlx::query("DELETE FROM players WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    let mut status = StatusCode::OK;
    for _ in 0..50 {
        status = app
            .get(
                &format!("/v1/players/{}/matches", gone.id),
                Some(&gone.token),
            )
            .await
            .status;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn a_revoked_token_cannot_spend_its_players_budget(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            player: Rate::per_minute(3, 3),
            ..RateLimitSettings::default()
        },
    )
    .await;
    let victim = app.register(&unique("victim")).await;
    let fresh = app.delete("/v1/me/tokens", &victim.token).await;
    assert_eq!(fresh.status, StatusCode::OK);
    let fresh = fresh.body["token"].as_str().unwrap().to_owned();
    for _ in 0..20 {
        let stolen = app.get("/v1/me", Some(&victim.token)).await;
        assert_eq!(stolen.status, StatusCode::UNAUTHORIZED, "{:?}", stolen.body);
    }
    let me = app.get("/v1/me", Some(&fresh)).await;
    assert_eq!(me.status, StatusCode::OK, "{:?}", me.body);
}

async fn log_in(app: &TestApp, name: &str, password: &str) -> reqwest::Response {
    app.client
        .post(app.url("/v1/sessions"))
        .json(&json!({ "name": name, "password": password }))
        .send()
        .await
        .unwrap()
}

async fn register_with_password(app: &TestApp, name: &str, password: &str) -> String {
    let reply = app
        .send(
            app.client
                .post(app.url("/v1/players"))
                .json(&json!({ "name": name, "password": password })),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    reply.body["token"].as_str().unwrap().to_owned()
}

#[sqlx::test]
async fn guessing_one_accounts_password_backs_off_on_every_replica(pool: PgPool) {
    let first = spawn_app(pool.clone()).await;
    let second = spawn_app(pool).await;
    let name = unique("guessed");
    register_with_password(&first, &name, "the right password").await;
    // Five failures, then the account is locked (2 s, then 4 s, ... after each failure).
    for guess in 0..5 {
        let wrong = log_in(&first, &name, &format!("guess number {guess}")).await;
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "guess {guess}");
    }
    for app in [&first, &second] {
        let locked = log_in(app, &name, "another guess").await;
        assert_eq!(locked.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry: u64 = locked.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=2).contains(&retry), "{retry}");
        let body: serde_json::Value = locked.json().await.unwrap();
        assert_eq!(body["code"], "rate_limited");
    }
    // The lock holds for the right password too, on the other replica as well.
    let right = log_in(&second, &name, "the right password").await;
    assert_eq!(right.status(), StatusCode::TOO_MANY_REQUESTS);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let right = log_in(&second, &name, "the right password").await;
    assert_eq!(right.status(), StatusCode::OK);
    // Success starts the count again.
    let wrong = log_in(&first, &name, "wrong again").await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn a_stolen_token_cannot_guess_the_password_by_changing_it(pool: PgPool) {
    let app = spawn_app(pool).await;
    let name = unique("changed");
    let token = register_with_password(&app, &name, "the right password").await;
    let before = stored_hash(&app, &name).await;
    let change = |current: String| {
        app.put(
            "/v1/me/password",
            &token,
            json!({ "current_password": current, "password": "a brand new password" }),
        )
    };
    for guess in 0..5 {
        let wrong = change(format!("guess number {guess}")).await;
        assert_eq!(wrong.status, StatusCode::FORBIDDEN, "{:?}", wrong.body);
        assert_eq!(wrong.code(), "wrong_password");
    }
    let locked = change("another guess".into()).await;
    assert_eq!(
        locked.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{:?}",
        locked.body
    );
    // The same account's log-in is locked too: one count per account.
    let login = log_in(&app, &name, "the right password").await;
    assert_eq!(login.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stored_hash(&app, &name).await, before, "nothing changed");
}

async fn stored_hash(app: &TestApp, name: &str) -> String {
    sqlx::query_scalar(
        "SELECT pw.password_hash FROM player_passwords pw JOIN players p ON p.id = pw.player_id
         WHERE p.name = $1",
    )
    .bind(name)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn a_full_hashing_budget_answers_503_with_retry_after_at_once(pool: PgPool) {
    use statki::accounts::password::{HashBudget, Password};

    statki::store::migrate(&pool).await.expect("migrations");
    let budget = HashBudget::new(1, 2, Duration::from_secs(30));
    let core = statki::app::App::new(
        pool.clone(),
        standard_settings(),
        Tokens::new(SECRET).expect("keys"),
    )
    .with_hash_budget(budget.clone());
    let live = statki::live::Hub::start(&pool, HubSettings::default());
    let router = statki::http::app(statki::http::state(core, live), &test_http_settings());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(statki::http::server::serve(
        listener,
        router,
        statki::http::server::ConnectionSettings::default(),
        std::future::pending(),
        Duration::ZERO,
    ));
    let client = reqwest::Client::new();
    // Accounts with passwords: only their checks run Argon2 (an unknown name spends none).
    for i in 0..12 {
        let created = client
            .post(format!("{address}/v1/players"))
            .json(&json!({ "name": format!("holder{i}"), "password": "the right one" }))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
    }
    // The budget kept full from outside while the log-ins arrive: one hash running and two
    // waiting at nearly every moment, so how the twelve spread out (each reads its account
    // first, slowly on a loaded machine or on Citus) does not decide the outcome.
    let keep_full = tokio::spawn(async move {
        let password = Password::new("kept busy by the test".into()).expect("a valid password");
        let mut running = futures::stream::FuturesUnordered::new();
        loop {
            while running.len() < 3 {
                running.push(budget.hash(&password));
            }
            if let Some(Err(_)) = futures::StreamExt::next(&mut running).await {
                // A log-in took the place: try again shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let attempts = (0..12).map(|i| {
        client
            .post(format!("{address}/v1/sessions"))
            .json(&json!({ "name": format!("holder{i}"), "password": "whatever it is" }))
            .send()
    });
    let answers = futures::future::join_all(attempts).await;
    let mut busy = 0;
    for answer in answers {
        let answer = answer.unwrap();
        match answer.status() {
            StatusCode::UNAUTHORIZED => {}
            StatusCode::SERVICE_UNAVAILABLE => {
                busy += 1;
                assert_eq!(answer.headers()["retry-after"], "1");
            }
            other => panic!("unexpected {other}"),
        }
    }
    keep_full.abort();
    // A log-in gets a place only in the instant between one hash ending and the next
    // taking its place.
    assert!(busy >= 10, "a full budget refuses at once: {busy} of 12");
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// An app on its own listener with a hashing budget of one slot and two waiting (about
/// what a small machine has), rate limits off.
async fn spawn_with_one_hashing_slot(pool: PgPool) -> String {
    statki::store::migrate(&pool).await.expect("migrations");
    let core = statki::app::App::new(
        pool.clone(),
        standard_settings(),
        Tokens::new(SECRET).expect("keys"),
    )
    .with_hash_budget(statki::accounts::password::HashBudget::new(
        1,
        2,
        Duration::from_secs(2),
    ));
    let live = statki::live::Hub::start(&pool, HubSettings::default());
    let router = statki::http::app(statki::http::state(core, live), &test_http_settings());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(statki::http::server::serve(
        listener,
        router,
        statki::http::server::ConnectionSettings::default(),
        std::future::pending(),
        Duration::ZERO,
    ));
    address
}

#[sqlx::test]
async fn a_spray_of_unknown_names_leaves_the_hashing_budget_to_real_accounts(pool: PgPool) {
    let address = spawn_with_one_hashing_slot(pool).await;
    let client = reqwest::Client::new();
    let registered = client
        .post(format!("{address}/v1/players"))
        .json(&json!({ "name": "real-user", "password": "the right one" }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), StatusCode::CREATED);
    // Forty sprayers, each logging in with unknown names back to back.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sprayers: Vec<_> = (0..40)
        .map(|sprayer| {
            let client = client.clone();
            let address = address.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut answers = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let answer = client
                        .post(format!("{address}/v1/sessions"))
                        .json(&json!({
                            "name": format!("nobody-{sprayer}-{answers}"),
                            "password": "whatever it is"
                        }))
                        .send()
                        .await
                        .unwrap();
                    // 503 when the budget is full (as before, when unknown names hashed).
                    assert!(
                        matches!(
                            answer.status(),
                            StatusCode::UNAUTHORIZED | StatusCode::SERVICE_UNAVAILABLE
                        ),
                        "{}",
                        answer.status()
                    );
                    answers += 1;
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut in_time = 0;
    for _ in 0..10 {
        let started = std::time::Instant::now();
        let answer = client
            .post(format!("{address}/v1/sessions"))
            .json(&json!({ "name": "real-user", "password": "the right one" }))
            .send()
            .await
            .unwrap();
        if answer.status() == StatusCode::OK && started.elapsed() <= Duration::from_secs(2) {
            in_time += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut sprayed = 0;
    for sprayer in sprayers {
        sprayed += sprayer.await.unwrap();
    }
    eprintln!("under a spray of {sprayed} unknown-name log-ins: {in_time} of 10 in time");
    assert!(sprayed >= 40, "the spray ran: {sprayed} answers");
    assert!(
        in_time >= 9,
        "the real user logged in {in_time} of 10 times within 2 s"
    );
}

#[sqlx::test]
async fn a_forged_proxy_header_from_a_peer_that_is_no_proxy_is_ignored(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(1, 1),
            trusted_proxy_header: Some("x-forwarded-for".parse().unwrap()),
            trusted_proxies: vec![statki::http::limits::parse_proxy("10.0.0.0/8").unwrap()],
            ..RateLimitSettings::default()
        },
    )
    .await;
    // The test client is 127.0.0.1, not one of the proxies: its header counts for nothing.
    let first = register_raw(&app, &unique("a"), Some("198.51.100.1")).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let forged = register_raw(&app, &unique("a"), Some("198.51.100.2")).await;
    assert_eq!(forged.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[sqlx::test]
async fn a_limit_answered_before_the_body_is_read_says_connection_close(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(1, 1),
            ..RateLimitSettings::default()
        },
    )
    .await;
    assert_eq!(
        register_raw(&app, &unique("a"), None).await.status(),
        StatusCode::CREATED
    );
    let refused = register_raw(&app, &unique("a"), None).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["connection"], "close");
}

#[sqlx::test]
async fn a_capital_i_look_alike_and_blank_or_stacked_names_are_refused(pool: PgPool) {
    let app = spawn_app(pool).await;
    app.register("Alazzzxz").await;
    let post = |name: String| {
        app.send(
            app.client
                .post(app.url("/v1/players"))
                .json(&json!({ "name": name })),
        )
    };
    let look_alike = post("AIazzzxz".into()).await;
    assert_eq!(
        look_alike.status,
        StatusCode::CONFLICT,
        "{:?}",
        look_alike.body
    );
    assert_eq!(look_alike.code(), "name_taken");
    for blank in [
        "\u{2800}".to_owned(),
        "\u{16FE4}".to_owned(),
        "\u{1D159}".to_owned(),
        format!("a{}", "\u{0301}".repeat(30)),
        "...".to_owned(),
    ] {
        let reply = post(blank.clone()).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{blank:?}");
        assert_eq!(reply.code(), "invalid_name");
    }
}

#[sqlx::test]
async fn an_unseen_dot_and_a_precomposed_letters_marks_are_caught(pool: PgPool) {
    let app = spawn_app(pool).await;
    let original = app.register("Alamoyryi").await;
    let post = |name: &str| {
        app.send(
            app.client
                .post(app.url("/v1/players"))
                .json(&json!({ "name": name })),
        )
    };
    // `i` + combining dot above draws exactly as `i`.
    let dotted = post("Alamoyryi\u{0307}").await;
    assert_eq!(dotted.status, StatusCode::CONFLICT, "{:?}", dotted.body);
    assert_eq!(dotted.code(), "name_taken");
    // A precomposed `á` is a letter and one mark: three more are four on one letter.
    let stacked = post("Stack\u{00E1}\u{0316}\u{0317}\u{0318}").await;
    assert_eq!(
        stacked.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        stacked.body
    );
    assert_eq!(stacked.code(), "invalid_name");
    // The account itself is unaffected.
    let me = app.get("/v1/me", Some(&original.token)).await;
    assert_eq!(me.status, StatusCode::OK);
}

#[sqlx::test]
async fn presence_is_told_only_through_a_running_match(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let watcher = app.register(&unique("watcher")).await;
    let path = format!("/v1/matches/{id}");
    // The target opens the app: an event stream of their own makes them online.
    let feed = app
        .client
        .get(app.url("/v1/stream"))
        .bearer_auth(&target.token)
        .send()
        .await
        .unwrap();
    assert_eq!(feed.status(), StatusCode::OK);
    let running = app.get(&path, Some(&watcher.token)).await;
    assert_eq!(
        running.body["presence"][&target.id], "online",
        "{:?}",
        running.body
    );
    assert_eq!(running.body["presence"][&shooter.id], "away");

    let resigned = app
        .post(&format!("{path}/resign"), &shooter.token, json!({}))
        .await;
    assert_eq!(resigned.status, StatusCode::OK, "{:?}", resigned.body);
    assert_eq!(resigned.body["phase"], "finished");
    // Over: nobody learns through it whether its players are online now, the spectator,
    // the players, or a stream's opening state.
    for token in [&watcher.token, &shooter.token, &target.token] {
        let over = app.get(&path, Some(token)).await;
        assert_eq!(over.status, StatusCode::OK);
        assert!(over.body.get("presence").is_none(), "{:?}", over.body);
    }
    let stream = app
        .client
        .get(app.url(&format!("{path}/stream")))
        .bearer_auth(&watcher.token)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let events = stream.text().await.unwrap();
    assert!(events.contains("event: state"), "{events}");
    assert!(!events.contains("\"presence\""), "{events}");
    drop(feed);
}

#[sqlx::test]
async fn any_answer_spends_the_stream_ticket_it_carried(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register(&unique("ala")).await;
    let ticket = || async {
        let reply = app.post("/v1/stream-tickets", &ala.token, json!({})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        reply.body["ticket"].as_str().unwrap().to_owned()
    };
    let open = |ticket: &str| {
        app.client
            .get(app.url(&format!("/v1/stream?ticket={ticket}")))
            .timeout(Duration::from_secs(5))
            .send()
    };
    // Refused for another reason: a resume point out of range, an unknown parameter, a
    // bearer header beside it, a path that takes no ticket.
    for (path, bearer, refused) in [
        (
            "/v1/stream?after=-1&ticket=",
            false,
            StatusCode::BAD_REQUEST,
        ),
        ("/v1/stream?bogus=1&ticket=", false, StatusCode::BAD_REQUEST),
        (
            "/v1/stream?after=99999999999999999&ticket=",
            false,
            StatusCode::BAD_REQUEST,
        ),
        ("/v1/nowhere?ticket=", false, StatusCode::NOT_FOUND),
        ("/v1/me?ticket=", true, StatusCode::OK),
    ] {
        let spent = ticket().await;
        let mut request = app.client.get(app.url(&format!("{path}{spent}")));
        if bearer {
            request = request.bearer_auth(&ala.token);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), refused, "{path}");
        let later = open(&spent).await.unwrap();
        assert_eq!(
            later.status(),
            StatusCode::UNAUTHORIZED,
            "{path}: the ticket still opened a stream"
        );
    }
    // An unspent ticket opens one stream, once.
    let fresh = ticket().await;
    let stream = open(&fresh).await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(
        open(&fresh).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    drop(stream);
}

/// Read only (no Docker engine here): the compose file believes `X-Forwarded-For` from the
/// balancer's own fixed address alone and publishes the balancer on loopback; HAProxy binds
/// loopback unless told otherwise and logs no query value.
#[test]
fn the_deploy_files_trust_only_the_balancer_and_bind_loopback() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let compose = std::fs::read_to_string(root.join("docker-compose.yml")).unwrap();
    let setting = |key: &str| -> Vec<String> {
        compose
            .lines()
            .filter_map(|line| line.trim_start().strip_prefix(key))
            .map(|value| value.trim().to_owned())
            .collect()
    };
    let trusted = setting("STATKI_TRUSTED_PROXIES:");
    assert_eq!(trusted.len(), 1, "{trusted:?}");
    let balancer = setting("ipv4_address:");
    assert_eq!(
        balancer.len(),
        1,
        "the balancer has one fixed address: {balancer:?}"
    );
    assert_eq!(trusted[0], format!("{}/32", balancer[0]));
    for private in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"] {
        assert!(!trusted[0].contains(private), "{}", trusted[0]);
    }
    // The fixed address lies outside the range Docker hands out.
    assert!(balancer[0].contains("172.29.83.10"), "{}", balancer[0]);
    assert!(compose.contains("ip_range: ${STATKI_NETWORK_DYNAMIC_RANGE:-172.29.83.128/25}"));
    assert!(
        compose.contains("\"${STATKI_PUBLISH_ADDRESS:-127.0.0.1}:${STATKI_PORT:-8000}:8000\""),
        "the balancer is published on loopback by default"
    );
    // One password per role: the service's owner and Patroni's replication role have their
    // own, not the superuser's (POSTGRES_PASSWORD was reused by five roles).
    for (role, variable) in [
        ("DATABASE_URL:", "${STATKI_DB_PASSWORD:?"),
        ("STATKI_OWNER_PASSWORD:", "${STATKI_DB_PASSWORD:?"),
        (
            "PATRONI_REPLICATION_PASSWORD:",
            "${STATKI_REPLICATION_PASSWORD:?",
        ),
        (
            "PATRONI_RESTAPI_PASSWORD:",
            "${STATKI_PATRONI_API_PASSWORD:?",
        ),
    ] {
        let values = setting(role);
        assert_eq!(values.len(), 1, "{role} {values:?}");
        assert!(values[0].contains(variable), "{role} {}", values[0]);
        assert!(
            !values[0].contains("POSTGRES_PASSWORD"),
            "{role} {}",
            values[0]
        );
    }
    let haproxy = std::fs::read_to_string(root.join("deploy/haproxy.cfg")).unwrap();
    assert!(haproxy.contains("bind \"${STATKI_BALANCER_BIND-127.0.0.1:8000}\""));
    let active = |line: &&str| !line.trim_start().starts_with('#');
    assert!(
        !haproxy
            .lines()
            .filter(active)
            .any(|l| l.contains("option httplog")),
        "httplog logs the query, tickets included"
    );
    assert!(haproxy.contains("regsub(=[^&]*,=_,g)"));
}

/// The answer a database error raised with `message` (SQLSTATE XX000, as Citus raises it
/// without a code of its own) gets: status, code and `Retry-After`.
async fn answer_to_raised(pool: &PgPool, message: &str) -> (StatusCode, String, Option<String>) {
    use axum::response::IntoResponse;
    // The messages are this test's own constants, without quotes.
    let error = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = '{message}'; END $$"
    )))
    .execute(pool)
    .await
    .expect_err("raised");
    let response =
        statki::http::error::ApiError::from(statki::app::AppError::Database(error)).into_response();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|value| value.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    (
        StatusCode::from_u16(problem["status"].as_u64().unwrap() as u16).unwrap(),
        problem["code"].as_str().unwrap().to_owned(),
        retry_after,
    )
}

/// A Citus worker lost at COMMIT leaves the outcome unknown: `503 unavailable` with
/// `Retry-After`, so the client retries with its key and finds what was stored (before:
/// `500 internal`, "stored state is unreadable: could not commit transaction …").
#[sqlx::test]
async fn an_unknown_commit_outcome_on_citus_is_503_with_retry_after(pool: PgPool) {
    let (status, code, retry_after) = answer_to_raised(
        &pool,
        "could not commit transaction for shard 102008 on at least one active node",
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
    );
    assert!(retry_after.is_some());
    let (status, _, _) =
        answer_to_raised(&pool, "failure on connection marked as essential: w1:5432").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // Any other internal error stays a fault of ours.
    let (status, code, _) = answer_to_raised(&pool, "something else broke").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::INTERNAL_SERVER_ERROR, "internal")
    );
}

/// A finished match of two fresh players (the creator resigned); its id and the winner.
async fn finished_match(app: &TestApp) -> (String, common::Player) {
    let (id, creator, other) = app.battle_match("statki").await;
    let resigned = app
        .post(
            &format!("/v1/matches/{id}/resign"),
            &creator.token,
            json!({}),
        )
        .await;
    assert_eq!(resigned.status, StatusCode::OK, "{:?}", resigned.body);
    (id, other)
}

async fn export_status(app: &TestApp, path: &str, token: &str) -> (StatusCode, String) {
    let answer = app
        .client
        .get(app.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let policy = answer
        .headers()
        .get("ratelimit-policy")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (answer.status(), policy)
}

#[sqlx::test]
async fn exports_have_a_byte_budget_per_caller_and_per_target(pool: PgPool) {
    let bytes = |per_second| Rate::per_second(per_second, per_second);
    // A tight budget per caller.
    let app = spawn_limited(
        pool.clone(),
        RateLimitSettings {
            register: Rate::per_minute(100, 100),
            export_caller: bytes(1000),
            export_target: bytes(10_000_000),
            ..RateLimitSettings::default()
        },
    )
    .await;
    let (id, winner) = finished_match(&app).await;
    let other = app.register(&unique("other")).await;
    let path = format!("/v1/matches/{id}/export");
    assert_eq!(
        export_status(&app, &path, &winner.token).await.0,
        StatusCode::OK
    );
    // The export took more than the caller's 1000 bytes: the next is refused at once.
    let (status, policy) = export_status(&app, &path, &winner.token).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(policy.starts_with("\"export\""), "{policy}");
    let players = format!("/v1/players/{}/matches/export", winner.id);
    assert_eq!(
        export_status(&app, &players, &winner.token).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another caller has a budget of their own.
    assert_eq!(
        export_status(&app, &path, &other.token).await.0,
        StatusCode::OK
    );

    // A tight budget per target: another caller of the same match waits, not of another.
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(100, 100),
            export_caller: bytes(10_000_000),
            export_target: bytes(1000),
            ..RateLimitSettings::default()
        },
    )
    .await;
    let (id, winner) = finished_match(&app).await;
    let (elsewhere, _) = finished_match(&app).await;
    let other = app.register(&unique("other")).await;
    let path = format!("/v1/matches/{id}/export");
    assert_eq!(
        export_status(&app, &path, &winner.token).await.0,
        StatusCode::OK
    );
    let (status, policy) = export_status(&app, &path, &other.token).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(policy.starts_with("\"export_target\""), "{policy}");
    let another = format!("/v1/matches/{elsewhere}/export");
    assert_eq!(
        export_status(&app, &another, &other.token).await.0,
        StatusCode::OK
    );
}

#[sqlx::test]
async fn a_streamed_export_is_paced_by_its_byte_budget(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(100, 100),
            export_caller: Rate::per_second(1000, 1000),
            export_target: Rate::per_second(10_000_000, 10_000_000),
            ..RateLimitSettings::default()
        },
    )
    .await;
    let (_, winner) = finished_match(&app).await;
    let mut opponents = Vec::new();
    for _ in 0..2 {
        let opponent = app.register(&unique("rival")).await;
        let id = app
            .create_match(&winner, json!({ "opponent": opponent.id }))
            .await;
        opponents.push((id, opponent));
    }
    // Two more finished matches of the winner's: the opponent joins and resigns at once
    // (a waiting match cannot be resigned, so play it into placement first).
    for (id, opponent) in &opponents {
        let joined = app
            .post(
                &format!("/v1/matches/{id}/join"),
                &opponent.token,
                json!({}),
            )
            .await;
        assert_eq!(joined.status, StatusCode::OK, "{:?}", joined.body);
        let resigned = app
            .post(
                &format!("/v1/matches/{id}/resign"),
                &opponent.token,
                json!({}),
            )
            .await;
        assert_eq!(resigned.status, StatusCode::OK, "{:?}", resigned.body);
    }
    let started = std::time::Instant::now();
    let body = app
        .client
        .get(app.url(&format!("/v1/players/{}/matches/export", winner.id)))
        .bearer_auth(&winner.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let took = started.elapsed();
    let lines: Vec<usize> = body.lines().map(|line| line.len() + 1).collect();
    assert_eq!(lines.len(), 3, "{body}");
    // Before each line after the first, the budget (1000 bytes in hand, 1000 a second) had
    // to be out of debt: all but the last line's bytes, less the burst, at 1000 a second.
    let owed: usize = lines[..lines.len() - 1].iter().sum::<usize>() - 1000;
    let least = Duration::from_secs_f64(owed as f64 / 1000.0 * 0.9);
    assert!(took >= least, "{took:?} for {lines:?}, at least {least:?}");
}

#[sqlx::test]
async fn concurrent_challenges_to_one_player_are_all_numbered(pool: PgPool) {
    let app = spawn_app(pool).await;
    let target = app.register(&unique("target")).await;
    let mut challengers = Vec::new();
    for i in 0..12 {
        challengers.push(app.register(&unique(&format!("c{i}"))).await);
    }
    let challenges = challengers.iter().map(|challenger| {
        app.post(
            "/v1/matches",
            &challenger.token,
            json!({ "opponent": target.id }),
        )
    });
    for reply in futures::future::join_all(challenges).await {
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    }
    let id: uuid::Uuid = target.id.parse().unwrap();
    let seqs: Vec<i64> =
        sqlx::query_scalar("SELECT seq FROM player_notices WHERE player_id = $1 ORDER BY seq")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(seqs, (1..=12).collect::<Vec<i64>>());
}

#[sqlx::test]
async fn challenges_to_one_player_are_capped_and_withdrawn_ones_cool_down(pool: PgPool) {
    let mut settings = standard_settings();
    settings.open_matches_per_player = 2;
    let app = common::spawn_app_with(pool, settings).await;
    let target = app.register(&unique("target")).await;
    // Twenty challengers fill the target's waiting challenges; the next is refused.
    for i in 0..20 {
        let challenger = app.register(&unique(&format!("c{i}"))).await;
        app.create_match(&challenger, json!({ "opponent": target.id }))
            .await;
    }
    let late = app.register(&unique("late")).await;
    let refused = app
        .post("/v1/matches", &late.token, json!({ "opponent": target.id }))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{:?}", refused.body);
    assert_eq!(refused.code(), "too_many_open_matches");
    // Creating and withdrawing at once does not free the slot at once.
    for _ in 0..2 {
        let id = app.create_match(&late, json!({})).await;
        let withdrawn = app
            .post(&format!("/v1/matches/{id}/resign"), &late.token, json!({}))
            .await;
        assert_eq!(withdrawn.status, StatusCode::OK, "{:?}", withdrawn.body);
    }
    let again = app.post("/v1/matches", &late.token, json!({})).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{:?}", again.body);
    assert_eq!(again.code(), "too_many_open_matches");
}

#[test]
fn metrics_are_not_public_by_default_and_the_help_says_what_each_cap_spans() {
    use clap::{CommandFactory, Parser};
    use statki::config::Config;
    let default = Config::try_parse_from(["statki"]).unwrap();
    assert_eq!(default.metrics_access(), MetricsAccess::Elsewhere);
    let open = Config::try_parse_from(["statki", "--metrics-open", "true"]).unwrap();
    assert_eq!(open.metrics_access(), MetricsAccess::Open);
    let token = Config::try_parse_from(["statki", "--metrics-token", "t"]).unwrap();
    assert_eq!(token.metrics_access(), MetricsAccess::Token("t".into()));
    let help = Config::command().render_long_help().to_string();
    let streams = help
        .split("--streams-per-player")
        .nth(1)
        .and_then(|rest| rest.split("--streams-per-replica").next())
        .unwrap();
    assert!(streams.contains("across all replicas"), "{streams}");
}

#[sqlx::test]
async fn readiness_is_answered_from_a_probe_a_second_old_at_most(pool: PgPool) {
    let app = spawn_app(pool).await;
    assert_eq!(app.get("/readyz", None).await.status, StatusCode::OK);
    // The database goes away: the probe of a moment ago still answers...
    app.pool.close().await;
    assert_eq!(app.get("/readyz", None).await.status, StatusCode::OK);
    // ...and a second later a new probe finds out.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(
        app.get("/readyz", None).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[sqlx::test]
async fn the_auditor_sees_a_matchs_hidden_information_only_once_it_ended(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, _second) = app.battle_match("statki").await;
    let id: uuid::Uuid = id.parse().unwrap();
    let visible = |sql: &'static str| {
        let pool = app.pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("SET LOCAL ROLE statki_auditor")
                .execute(&mut *tx)
                .await
                .unwrap();
            let count: i64 = sqlx::query_scalar(sql)
                .bind(id)
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            tx.rollback().await.unwrap();
            count
        }
    };
    let events = "SELECT count(*) FROM match_log WHERE match_id = $1";
    let placements = "SELECT count(*) FROM match_log
                      WHERE match_id = $1 AND payload::text LIKE '%salt%'";
    let row = "SELECT count(*) FROM matches WHERE id = $1";
    assert_eq!(
        visible(events).await,
        0,
        "a running match's events are hidden"
    );
    assert_eq!(
        visible(row).await,
        0,
        "a running match's snapshot is hidden"
    );
    let resigned = app
        .post(&format!("/v1/matches/{id}/resign"), &first.token, json!({}))
        .await;
    assert_eq!(resigned.status, StatusCode::OK, "{:?}", resigned.body);
    assert!(visible(events).await > 0, "readable once it ended");
    assert!(visible(placements).await > 0, "salts included");
    assert_eq!(visible(row).await, 1);
}

#[sqlx::test]
async fn the_service_role_cannot_rewrite_the_record_of_play(pool: PgPool) {
    statki::store::migrate(&pool)
        .await
        .expect("migrations, as the owner");
    let service = statki::store::pool_options(4, Some(statki::store::APP_ROLE.into()))
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let role: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(&service)
        .await
        .unwrap();
    assert_eq!(role, "statki_app");
    // The whole service works as that role: registration, a battle, a notice, a rating.
    let core = statki::app::App::new(
        service.clone(),
        standard_settings(),
        Tokens::new(SECRET).expect("keys"),
    );
    let live = statki::live::Hub::start(&service, HubSettings::default());
    let router = statki::http::app(
        statki::http::state(core.clone(), live.clone()),
        &test_http_settings(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(statki::http::server::serve(
        listener,
        router,
        statki::http::server::ConnectionSettings::default(),
        std::future::pending(),
        Duration::ZERO,
    ));
    let app = TestApp {
        address,
        client: reqwest::Client::new(),
        pool: service.clone(),
        app: core,
        live,
    };
    let (id, first, second) = app.battle_match("statki").await;
    let challenge = app
        .post(
            "/v1/matches",
            &first.token,
            json!({ "opponent": second.id }),
        )
        .await;
    assert_eq!(
        challenge.status,
        StatusCode::CREATED,
        "{:?}",
        challenge.body
    );
    let resigned = app
        .post(&format!("/v1/matches/{id}/resign"), &first.token, json!({}))
        .await;
    assert_eq!(resigned.status, StatusCode::OK, "{:?}", resigned.body);
    // ...but cannot change what happened, nor switch the guard off.
    for attack in [
        "UPDATE match_events SET payload = '{}'",
        "DELETE FROM match_events",
        "ALTER TABLE match_events DISABLE TRIGGER ALL",
        "UPDATE rating_changes SET score = 1",
        "DROP TABLE settings",
    ] {
        let error = sqlx::query(attack)
            .execute(&service)
            .await
            .expect_err(attack);
        let code = error
            .as_database_error()
            .and_then(|e| e.code())
            .map(|code| code.into_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{attack}: {error}");
    }
}

#[sqlx::test]
async fn a_retried_registration_is_not_charged_to_the_registration_limit(pool: PgPool) {
    let app = spawn_limited(
        pool,
        RateLimitSettings {
            register: Rate::per_minute(1, 2),
            ..RateLimitSettings::default()
        },
    )
    .await;
    let name = unique("keyed");
    let keyed = || {
        app.client
            .post(app.url("/v1/players"))
            .header("idempotency-key", format!("signup-{name}"))
            .json(&json!({ "name": name }))
            .send()
    };
    let first = keyed().await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: serde_json::Value = first.json().await.unwrap();
    // A client that lost the answer retries, again and again: each retry is the first answer,
    // never a 429, and spends nothing of the registration budget.
    for _ in 0..5 {
        let retry = keyed().await.unwrap();
        assert_eq!(retry.status(), StatusCode::CREATED);
        let retry: serde_json::Value = retry.json().await.unwrap();
        assert_eq!(retry["id"], first["id"]);
    }
    // The budget (a burst of two) still holds its second registration, and no more.
    let second = register_raw(&app, &unique("second"), None).await;
    assert_eq!(second.status(), StatusCode::CREATED);
    let third = register_raw(&app, &unique("third"), None).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    // A new key is a new registration, charged like any other.
    let fresh = app
        .client
        .post(app.url("/v1/players"))
        .header("idempotency-key", "another-key")
        .json(&json!({ "name": unique("fresh") }))
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), StatusCode::TOO_MANY_REQUESTS);
}
