//! Faults: with the database unreachable requests are refused cleanly, and when database
//! connections are killed mid-play no answered move is lost and no refused one is stored.

use crate::common;

use std::collections::HashSet;

use common::spawn_app;
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

#[sqlx::test]
async fn with_the_database_gone_requests_get_503_and_readiness_fails(pool: PgPool) {
    let app = spawn_app(pool).await;
    let player = app.register("Ala").await;
    // A second app over a pool whose server does not answer.
    let dead = PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_millis(500))
        .connect_lazy("postgres://postgres@127.0.0.1:1/none")
        .unwrap();
    let settings = common::standard_settings();
    let core = statki::app::App::new(
        dead.clone(),
        settings,
        statki::auth::Tokens::new(common::SECRET).unwrap(),
    );
    let live = statki::live::Hub::start(&dead, Default::default());
    let router = statki::http::app(statki::http::state(core, live), &Default::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let client = reqwest::Client::new();

    let ready = client
        .get(format!("{address}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let created = client
        .post(format!("{address}/v1/matches"))
        .bearer_auth(&player.token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(created.headers()["retry-after"], "2");
    let body: serde_json::Value = created.json().await.unwrap();
    assert_eq!(body["code"], "unavailable");
    assert_eq!(app.event_count().await, 0);
}

#[sqlx::test]
async fn killed_connections_lose_no_answered_shot(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (id, first, second) = app.battle_match("statki").await;
    let killer = PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let players = [first, second];
    let mut answered = HashSet::new();
    let mut turn = 0;
    let cells: Vec<String> = statki::engine::Cell::all()
        .map(|cell| cell.to_string())
        .collect();
    let mut next = [0usize, 0usize];
    // Kill every other connection of this test's database, again and again, mid-play.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                )
                .execute(&killer)
                .await;
                // Often enough to cut many requests, seldom enough that a request on a
                // loaded machine (a new connection and its setup) can get through.
                tokio::time::sleep(std::time::Duration::from_millis(75)).await;
            }
        })
    };
    let mut failed = 0;
    // Like a well-behaved client, retry a failed shot with the same Idempotency-Key: a
    // shot whose commit happened before its connection died is answered from the record.
    for shot in 0..40 {
        let shooter = &players[turn];
        let cell = &cells[next[turn]];
        let mut attempts = 0;
        let reply = loop {
            attempts += 1;
            assert!(attempts < 200, "shot {shot} never got through");
            let reply = app
                .send(
                    app.client
                        .post(app.url(&format!("/v1/matches/{id}/shots")))
                        .bearer_auth(&shooter.token)
                        .header("idempotency-key", format!("shot-{shot}"))
                        .json(&json!({ "cell": cell })),
                )
                .await;
            if reply.status == StatusCode::OK {
                break reply;
            }
            assert!(
                reply.status.is_server_error(),
                "{}: {:?}",
                reply.status,
                reply.body
            );
            failed += 1;
        };
        answered.insert((turn, cell.clone()));
        next[turn] += 1;
        if reply.body["phase"] == "finished" {
            break;
        }
        turn = 1 - turn;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    killing.await.unwrap();
    assert!(
        failed > 0,
        "no request was hit by a killed connection; the test proves nothing"
    );
    assert!(
        answered.len() > 20,
        "too few shots got through: {}",
        answered.len()
    );
    let stored: Vec<(String, String)> = sqlx::query_as(
        "SELECT payload->>'player', payload->>'cell' FROM match_events
         WHERE match_id = $1::uuid AND kind = 'shot_fired' ORDER BY seq",
    )
    .bind(&id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let stored: HashSet<(usize, String)> = stored
        .into_iter()
        .map(|(player, cell)| (usize::from(player != players[0].id), cell))
        .collect();
    assert_eq!(
        stored, answered,
        "stored shots must be exactly the answered ones"
    );
}
