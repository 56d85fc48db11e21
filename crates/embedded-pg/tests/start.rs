//! Starts a real embedded cluster: connect, persist a table across a restart, stop.

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use embedded_pg::EmbeddedPostgres;
use sqlx::postgres::PgPoolOptions;

/// A fresh, not yet existing path under /tmp; `start` creates it.
fn unique_root() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    PathBuf::from(format!(
        "/tmp/statki-embedded-pg-test-{}-{nanos}",
        std::process::id()
    ))
}

async fn connect(url: &str) -> sqlx::PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .connect(url)
        .await
        .unwrap_or_else(|err| panic!("connect to {url}: {err}"))
}

#[tokio::test]
async fn start_connect_restart_and_stop() {
    let root = unique_root();
    // A nested, not yet existing data dir also exercises creating parents.
    let data_dir = root.join("data");

    let started = Instant::now();
    let pg = EmbeddedPostgres::start(&data_dir).await.unwrap();
    eprintln!(
        "first start (initdb + start + createdb): {:?}",
        started.elapsed()
    );
    let url = pg.database_url();
    assert!(
        url.starts_with("postgres://postgres@localhost/statki?host=/"),
        "{url}"
    );

    let pool = connect(&url).await;
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(one, 1);
    sqlx::query("CREATE TABLE survives_restart (id int PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO survives_restart VALUES (42)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let stopping = Instant::now();
    pg.stop().await.unwrap();
    eprintln!("stop: {:?}", stopping.elapsed());

    let restarted = Instant::now();
    let pg = EmbeddedPostgres::start(&data_dir).await.unwrap();
    eprintln!(
        "second start (existing data dir): {:?}",
        restarted.elapsed()
    );
    assert_eq!(pg.database_url(), url, "same socket dir after restart");

    let pool = connect(&pg.database_url()).await;
    let id: i32 = sqlx::query_scalar("SELECT id FROM survives_restart")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(id, 42);
    pool.close().await;

    // Starting again while it runs reuses the running server instead of failing.
    let reused_at = Instant::now();
    let reused = EmbeddedPostgres::start(&data_dir).await.unwrap();
    eprintln!("start while running (reuse): {:?}", reused_at.elapsed());
    assert_eq!(reused.database_url(), url);

    // Both handles control the same server: the second stop finds it already stopped.
    reused.stop().await.unwrap();
    pg.stop().await.unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[tokio::test]
async fn drop_without_stop_shuts_the_server_down() {
    let root = unique_root().with_extension("drop");
    let data_dir = root.join("data");

    let pg = EmbeddedPostgres::start(&data_dir).await.unwrap();
    let url = pg.database_url();
    drop(pg);

    assert!(
        !data_dir.join("postmaster.pid").exists(),
        "postmaster.pid should be gone after Drop"
    );
    let refused = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(2))
        .connect(&url)
        .await;
    assert!(refused.is_err(), "server still answers after Drop");
    std::fs::remove_dir_all(&root).unwrap();
}
