//! Every ```sql block of README.md runs against a database with played matches, read
//! only, and returns sensible rows.

use crate::common;
use crate::ladder_support;

use common::{TestApp, spawn_app};
use ladder_support::{clock_ahead, place, ranked, ranked_all_sunk, resign, started};
use serde_json::json;
use sqlx::postgres::PgRow;
use sqlx::{Column, PgPool, Row};

const AUDIT: &str = include_str!("../../README.md");

/// The SQL of every ```sql fence, in order.
fn sql_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        let fence = line.trim_start();
        match &mut current {
            None if fence.starts_with("```sql") => current = Some(String::new()),
            Some(_) if fence.starts_with("```") => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(current.is_none(), "an unclosed ```sql block");
    blocks
}

/// Matches of every ending between `ala`, `bolek` and `celina`, the names the queries use.
async fn seed(app: &TestApp) {
    let ala = app.register("ala").await;
    let bolek = app.register("bolek").await;
    let celina = app.register("celina").await;
    ranked_all_sunk(app, &ala, &bolek, &ala, "statki").await;
    let lost = ranked(app, &celina, &ala, "statki").await;
    resign(app, &lost, &ala).await;
    // Shot timeout, placement timeout, and both placement clocks at once.
    let slow = ranked(app, &ala, &bolek, "battaglia").await;
    place(app, &slow, &ala, "battaglia").await;
    place(app, &slow, &bolek, "battaglia").await;
    assert_eq!(clock_ahead(app, 31).await, 1);
    let half = ranked(app, &bolek, &celina, "statki").await;
    place(app, &half, &celina, "statki").await;
    ranked(app, &ala, &celina, "classic").await;
    assert_eq!(clock_ahead(app, 121).await, 2);
    // Unranked, cancelled, and one under way.
    let casual = started(app, &bolek, &ala, json!({ "ruleset": "classic" })).await;
    resign(app, &casual, &bolek).await;
    let withdrawn = app.create_match(&celina, json!({})).await;
    resign(app, &withdrawn, &celina).await;
    ranked(app, &bolek, &celina, "statki").await;
}

fn columns(row: &PgRow) -> Vec<&str> {
    row.columns().iter().map(|column| column.name()).collect()
}

/// Checks beyond "it ran and returned rows", by the columns a query returns.
fn check_rows(title: &str, rows: &[PgRow]) {
    let names = columns(&rows[0]);
    let has = |name: &str| names.contains(&name);
    if has("hit_rate") {
        for row in rows {
            let rate: f64 = row.get("hit_rate");
            let (shots, hits): (i64, i64) = (row.get("shots"), row.get("hits"));
            assert!(
                (0.0..=1.0).contains(&rate) && hits <= shots && shots > 0,
                "{title}"
            );
        }
        // ala sank a whole statki fleet with 17 shots and never missed.
        let statki = rows
            .iter()
            .find(|row| row.get::<String, _>("ruleset") == "statki")
            .unwrap();
        assert_eq!(statki.get::<f64, _>("hit_rate"), 1.0, "{title}");
    }
    if has("reason") && title.contains("timeout") {
        let reasons: Vec<String> = rows.iter().map(|row| row.get("reason")).collect();
        assert!(
            reasons.iter().all(|reason| reason.ends_with("timeout")),
            "{title}: {reasons:?}"
        );
        for reason in [
            "shot_timeout",
            "placement_timeout",
            "both_placement_timeout",
        ] {
            assert!(reasons.iter().any(|r| r == reason), "{title}: no {reason}");
        }
    }
    if has("times") {
        let total: i64 = rows.iter().map(|row| row.get::<i64, _>("times")).sum();
        // Shot and placement timeouts have one loser each; the double timeout has two.
        assert_eq!(total, 4, "{title}");
    }
    if has("game") {
        let games: Vec<i32> = rows.iter().map(|row| row.get("game")).collect();
        assert_eq!(
            games,
            (1..=games.len() as i32).collect::<Vec<_>>(),
            "{title}"
        );
        assert_eq!(games.len(), 2, "{title}: ala played two rated statki games");
    }
    if has("kind") && has("seq") {
        let kinds: Vec<String> = rows.iter().map(|row| row.get("kind")).collect();
        let seqs: Vec<i64> = rows.iter().map(|row| row.get("seq")).collect();
        assert_eq!(
            kinds.first().map(String::as_str),
            Some("match_created"),
            "{title}"
        );
        assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "{title}");
        assert!(kinds.iter().any(|kind| kind == "match_finished"), "{title}");
        if has("actor") {
            // The creator made the match, by name.
            let creator: Option<String> = rows[0].get("actor");
            assert!(creator.is_some_and(|name| !name.is_empty()), "{title}");
        }
    }
    if has("outcome") && has("cell") {
        let outcomes: Vec<String> = rows.iter().map(|row| row.get("outcome")).collect();
        assert!(
            outcomes
                .iter()
                .all(|o| ["miss", "hit", "sunk"].contains(&o.as_str())),
            "{title}"
        );
        if has("shooter_name") {
            let shooters: Vec<Option<String>> =
                rows.iter().map(|row| row.get("shooter_name")).collect();
            assert!(
                shooters.iter().all(Option::is_some),
                "{title}: {shooters:?}"
            );
        }
    }
    if has("rank") && has("provisional") {
        assert_eq!(rows[0].get::<i64, _>("rank"), 1, "{title}");
        assert!(
            rows.iter().all(|row| row.get::<bool, _>("provisional")),
            "{title}: everyone is new"
        );
    }
    if has("winner_name") && has("events") {
        assert_eq!(rows.len(), 1, "{title}: one match");
        assert_eq!(rows[0].get::<String, _>("phase"), "finished", "{title}");
    }
}

#[sqlx::test]
async fn every_query_in_the_audit_guide_runs_and_returns_sensible_rows(pool: PgPool) {
    let app = spawn_app(pool).await;
    seed(&app).await;
    let blocks = sql_blocks(AUDIT);
    assert!(
        blocks.len() >= 10,
        "found only {} ```sql blocks",
        blocks.len()
    );
    for block in &blocks {
        let title = block
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("-- ")
            .to_owned();
        // Audit queries only read, as the auditor role the guide tells operators to use:
        // a write, or a read of something secret, would fail here.
        let mut tx = app.pool.begin().await.unwrap();
        sqlx::query("SET TRANSACTION READ ONLY")
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query("SET LOCAL ROLE statki_auditor")
            .execute(&mut *tx)
            .await
            .unwrap();
        let rows = sqlx::query(sqlx::AssertSqlSafe(block.clone()))
            .fetch_all(&mut *tx)
            .await
            .unwrap_or_else(|error| panic!("{title}: {error}\n{block}"));
        tx.rollback().await.unwrap();
        if title.contains("(expect no rows)") {
            assert!(rows.is_empty(), "{title}: {} rows", rows.len());
        } else {
            assert!(!rows.is_empty(), "{title}: no rows");
            check_rows(&title, &rows);
        }
    }
}

#[sqlx::test]
async fn the_auditor_role_reads_the_record_but_no_secret(pool: PgPool) {
    let app = spawn_app(pool).await;
    seed(&app).await;
    statki::store::settings::get_or_init(&app.pool, "jwt_secret", "a-generated-secret")
        .await
        .unwrap();
    let as_auditor = |sql: &'static str| {
        let pool = app.pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("SET LOCAL ROLE statki_auditor")
                .execute(&mut *tx)
                .await
                .unwrap();
            let result = sqlx::query(sql).fetch_all(&mut *tx).await;
            tx.rollback().await.unwrap();
            result
        }
    };
    for readable in [
        "SELECT * FROM match_log",
        "SELECT * FROM matches",
        "SELECT * FROM ratings",
        "SELECT * FROM rating_changes",
        "SELECT * FROM match_summary",
        "SELECT * FROM shot_log",
        "SELECT * FROM rating_history",
        "SELECT id, name, created_at FROM players",
    ] {
        let rows = as_auditor(readable)
            .await
            .unwrap_or_else(|e| panic!("{readable}: {e}"));
        assert!(!rows.is_empty(), "{readable}");
    }
    for secret in [
        "SELECT value FROM settings",
        "SELECT * FROM idempotency_keys",
        // The event log only through `match_log`, which holds a running match's back.
        "SELECT * FROM match_events",
        // Every column of players, so any column added later must be granted on purpose.
        "SELECT * FROM players",
        "SELECT * FROM player_notices",
    ] {
        let error = as_auditor(secret).await.expect_err(secret);
        let code = error
            .as_database_error()
            .and_then(|e| e.code())
            .map(|code| code.into_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{secret}: {error}");
    }
    for write in [
        "UPDATE matches SET phase = 'cancelled'",
        "INSERT INTO settings (key, value) VALUES ('x', 'y')",
    ] {
        assert!(as_auditor(write).await.is_err(), "{write}");
    }
}

#[test]
fn sql_blocks_are_extracted_whole() {
    let markdown =
        "text\n```sql\nSELECT 1;\n```\n```console\n$ x\n```\n```sql\n-- t\nSELECT\n  2;\n```\n";
    assert_eq!(
        sql_blocks(markdown),
        ["SELECT 1;\n", "-- t\nSELECT\n  2;\n"]
    );
}
