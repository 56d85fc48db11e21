//! `statki verify`: passes on an honestly played database, catches tampered rows, ratings
//! and forged logs, and the binary's exit status says so. The logs themselves refuse
//! tampering.

use crate::common;
use crate::ladder_support;

use chrono::{DateTime, Utc};
use common::{Player, TestApp, spawn_app, unique};
use ladder_support::{clock_ahead, place, play_out, ranked, ranked_all_sunk, resign, started};
use serde_json::json;
use sqlx::PgPool;
use statki::engine::{
    Clock, Command, Draw, Event, HouseOptions, Match, MatchRules, Orientation, Outcome, Placement,
    RuleSetId,
};
use statki::verify::{self, Report};
use uuid::Uuid;

/// Matches of every kind: ranked and unranked, every way of ending, one cancelled, one
/// still being played. Returns the players and the ranked all-sunk match.
async fn play_everything(app: &TestApp) -> (Player, Player, String) {
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let sunk = ranked_all_sunk(app, &a, &b, &a, "statki").await;
    ranked_all_sunk(app, &a, &b, &b, "classic").await;
    let resigned = ranked(app, &b, &a, "statki").await;
    resign(app, &resigned, &b).await;
    let casual = started(app, &a, &b, json!({ "ruleset": "battaglia" })).await;
    place(app, &casual, &a, "battaglia").await;
    place(app, &casual, &b, "battaglia").await;
    play_out(app, &casual, &b, &a, "battaglia").await;
    // A shot timeout, and a draw on the placement clock.
    let slow = ranked(app, &a, &b, "battaglia").await;
    place(app, &slow, &a, "battaglia").await;
    place(app, &slow, &b, "battaglia").await;
    assert_eq!(clock_ahead(app, 31).await, 1);
    ranked(app, &a, &b, "statki").await;
    assert_eq!(clock_ahead(app, 121).await, 1);
    // Cancelled, and still under way.
    let withdrawn = app.create_match(&a, json!({ "ranked": true })).await;
    resign(app, &withdrawn, &a).await;
    let live = ranked(app, &a, &b, "statki").await;
    place(app, &live, &a, "statki").await;
    (a, b, sunk)
}

fn flagged(report: &Report, id: &str, needle: &str) -> bool {
    let id = Uuid::parse_str(id).unwrap();
    report
        .mismatches
        .iter()
        .any(|m| m.match_id == Some(id) && m.what.contains(needle))
}

#[sqlx::test]
async fn an_honest_database_verifies(pool: PgPool) {
    let app = spawn_app(pool).await;
    play_everything(&app).await;
    let report = verify::run(&app.pool).await.unwrap();
    assert!(report.ok(), "{report}");
    assert_eq!(report.matches, 8);
    assert_eq!(report.finished, 6);
    assert_eq!(report.ranked, 5);
    assert_eq!(report.rating_changes, 10);
    assert_eq!(report.standings, 6, "two players on three ladders");
    assert!(report.to_string().contains("OK"), "{report}");
    // A walk a match at a time (many pages) finds the same.
    assert_eq!(verify::run_in_pages(&app.pool, 1).await.unwrap(), report);
}

#[sqlx::test]
async fn a_tampered_match_row_is_caught(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (_, b, sunk) = play_everything(&app).await;
    // The column copy of the result says b won…
    sqlx::query("UPDATE matches SET winner = $2::uuid WHERE id = $1::uuid")
        .bind(&sunk)
        .bind(&b.id)
        .execute(&app.pool)
        .await
        .unwrap();
    let report = verify::run(&app.pool).await.unwrap();
    assert!(!report.ok());
    assert!(flagged(&report, &sunk, "column `winner`"), "{report}");
    assert_eq!(report.mismatches.len(), 1, "{report}");

    // …and the snapshot says it was a resignation.
    sqlx::query(
        "UPDATE matches SET snapshot = jsonb_set(snapshot, '{result,reason}', '\"resigned\"')
         WHERE id = $1::uuid",
    )
    .bind(&sunk)
    .execute(&app.pool)
    .await
    .unwrap();
    let report = verify::run(&app.pool).await.unwrap();
    assert!(
        flagged(
            &report,
            &sunk,
            "snapshot differs from the fold of its events (result)"
        ),
        "{report}"
    );
    assert!(report.to_string().contains("FAILED"), "{report}");
}

#[sqlx::test]
async fn a_tampered_rating_is_caught(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (a, _, _) = play_everything(&app).await;
    sqlx::query("UPDATE ratings SET rating = rating + 100 WHERE player_id = $1::uuid AND ruleset = 'classic'")
        .bind(&a.id)
        .execute(&app.pool)
        .await
        .unwrap();
    let report = verify::run(&app.pool).await.unwrap();
    // The standing differs from its history, and the ladder's bucket counts (kept by the
    // service, not by this update) differ from the standings: the bucket the rating left
    // and the one it entered.
    assert_eq!(report.mismatches.len(), 3, "{report}");
    let what = &report.mismatches[0].what;
    assert!(
        what.contains(&a.id) && what.contains("classic") && what.contains("standing"),
        "{what}"
    );
    for bucket in &report.mismatches[1..] {
        assert!(
            bucket
                .what
                .contains("classic ladder: rating_buckets counts"),
            "{}",
            bucket.what
        );
    }
}

/// Plays everything, checks that `statki verify` passes, runs `tamper` (an update of one
/// row of derived data, returning its player or nothing) and gives back the one mismatch
/// verify then reports, with that player.
async fn the_one_mismatch_after(
    pool: PgPool,
    tamper: &'static str,
) -> (String, Option<uuid::Uuid>) {
    let app = spawn_app(pool).await;
    play_everything(&app).await;
    assert!(verify::run(&app.pool).await.unwrap().ok());
    let player: Option<uuid::Uuid> = sqlx::query_scalar(tamper)
        .fetch_optional(&app.pool)
        .await
        .unwrap();
    let report = verify::run(&app.pool).await.unwrap();
    assert_eq!(report.mismatches.len(), 1, "{report}");
    (report.mismatches[0].what.clone(), player)
}

#[sqlx::test]
async fn a_tampered_bucket_count_is_caught(pool: PgPool) {
    let (what, _) = the_one_mismatch_after(
        pool,
        "UPDATE rating_buckets SET players = players + 1
         WHERE (ruleset, bucket) = (SELECT ruleset, bucket FROM rating_buckets
                                    WHERE players > 0 ORDER BY 1, 2 LIMIT 1)",
    )
    .await;
    assert!(what.contains("rating_buckets counts"), "{what}");
}

#[sqlx::test]
async fn a_tampered_player_record_is_caught(pool: PgPool) {
    let (what, player) = the_one_mismatch_after(
        pool,
        "UPDATE player_records SET losses = losses + 1
         WHERE player_id = (SELECT player_id FROM player_records ORDER BY 1 LIMIT 1)
         RETURNING player_id",
    )
    .await;
    let player = player.expect("a record was tampered with").to_string();
    assert!(
        what.contains("player_records keeps") && what.contains(&player),
        "{what}"
    );
}

#[sqlx::test]
async fn a_tampered_ladder_name_is_caught(pool: PgPool) {
    let (what, player) = the_one_mismatch_after(
        pool,
        "UPDATE ratings SET name = 'someone else'
         WHERE (ruleset, player_id) = (SELECT ruleset, player_id FROM ratings ORDER BY 1, 2 LIMIT 1)
         RETURNING player_id",
    )
    .await;
    let player = player.expect("a standing was tampered with").to_string();
    assert!(
        what.contains("keeps the name \"someone else\"") && what.contains(&player),
        "{what}"
    );
}

/// A statki match `a` created at the database's time, as the engine made it: its log so
/// far, its state, and the draw every later command uses.
struct Created {
    a: Uuid,
    b: Uuid,
    now: DateTime<Utc>,
    log: Vec<Event>,
    state: Match,
    draw: Draw,
}

async fn created(app: &TestApp, a: &Player, b: &Player) -> Created {
    let (a, b) = (
        Uuid::parse_str(&a.id).unwrap(),
        Uuid::parse_str(&b.id).unwrap(),
    );
    let now = ladder_support::db_now(app).await;
    let clock = Clock {
        placement_seconds: 120,
        shot_seconds: 30,
    };
    let rules = MatchRules::new(RuleSetId::Statki, HouseOptions::default(), clock, 900).unwrap();
    let log = vec![Match::create(a, rules, false, None, now).unwrap()];
    let state = Match::fold(&log).unwrap();
    let draw = Draw {
        coin: false,
        salt: [7; 16],
    };
    Created {
        a,
        b,
        now,
        log,
        state,
        draw,
    }
}

/// Stores the match row of `state` (its events are appended by the caller, as it forges them).
async fn insert_row(app: &TestApp, state: &Match, events: usize, now: DateTime<Utc>) -> Uuid {
    let id = Uuid::now_v7();
    statki::store::matches::insert(
        &mut app.pool.acquire().await.unwrap(),
        id,
        state,
        events as i64,
        now,
    )
    .await
    .unwrap();
    id
}

/// Writes a whole match as the service would, from events made by the engine; with
/// `forge`, one shot that missed is recorded as a hit.
async fn write_match(app: &TestApp, a: &Player, b: &Player, forge: bool) -> String {
    let Created {
        a,
        b,
        now,
        mut log,
        mut state,
        draw,
    } = created(app, a, b).await;
    let placements: Vec<Placement> = ["A1", "A3", "A5", "A7", "A9"]
        .iter()
        .map(|cell| Placement {
            cell: cell.parse().unwrap(),
            orientation: Orientation::Horizontal,
        })
        .collect();
    for (actor, command) in [
        (b, Command::Join),
        (
            a,
            Command::PlaceFleet {
                placements: placements.clone(),
            },
        ),
        (b, Command::PlaceFleet { placements }),
    ] {
        log.extend(state.execute(actor, &command, now, draw).unwrap());
    }
    let mut shot = state
        .decide(
            a,
            &Command::Fire {
                cell: "J2".parse().unwrap(),
            },
            now,
            draw,
        )
        .unwrap();
    if forge {
        let Event::ShotFired { outcome, .. } = &mut shot[0] else {
            panic!("{shot:?}")
        };
        assert_eq!(*outcome, Outcome::Miss);
        *outcome = Outcome::Hit;
    }
    // The fold takes the forged shot: only the referee's re-check can see through it.
    state.evolve(&shot[0]).unwrap();
    log.extend(shot);
    log.extend(state.execute(b, &Command::Resign, now, draw).unwrap());

    let id = insert_row(app, &state, log.len(), now).await;
    statki::store::events::append(&app.pool, id, 0, now, &log)
        .await
        .unwrap();
    id.to_string()
}

#[sqlx::test]
async fn a_forged_shot_outcome_is_caught_by_re_refereeing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let honest = write_match(&app, &a, &b, false).await;
    let report = verify::run(&app.pool).await.unwrap();
    assert!(report.ok(), "the honest copy verifies: {report}");

    let forged = write_match(&app, &a, &b, true).await;
    let report = verify::run(&app.pool).await.unwrap();
    assert_eq!(report.mismatches.len(), 1, "{report}");
    assert!(
        flagged(
            &report,
            &forged,
            "(shot_fired) is not what the rules decide"
        ),
        "{report}"
    );
    assert!(!flagged(&report, &honest, ""));
}

#[sqlx::test]
async fn the_event_log_and_the_rating_history_refuse_changes(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (_, _, sunk) = play_everything(&app).await;
    let statements = [
        "UPDATE match_events SET payload = '{}' WHERE match_id = $1::uuid AND seq = 1",
        "DELETE FROM match_events WHERE match_id = $1::uuid",
        "UPDATE rating_changes SET rating_after = 3000 WHERE match_id = $1::uuid",
        "DELETE FROM rating_changes WHERE match_id = $1::uuid",
    ];
    for statement in statements {
        let error = sqlx::query(sqlx::AssertSqlSafe(statement))
            .bind(&sunk)
            .execute(&app.pool)
            .await
            .expect_err(statement);
        assert!(
            error.to_string().contains("append-only"),
            "{statement}: {error}"
        );
    }
    for table in ["match_events", "rating_changes"] {
        let error = sqlx::query(sqlx::AssertSqlSafe(format!("TRUNCATE {table} CASCADE")))
            .execute(&app.pool)
            .await
            .expect_err(table);
        assert!(
            error.to_string().contains("append-only"),
            "{table}: {error}"
        );
    }
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM match_events WHERE match_id = $1::uuid")
            .bind(&sunk)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(events > 30);
    let report = verify::run(&app.pool).await.unwrap();
    assert!(report.ok(), "{report}");
}

/// The test database's own URL, for the binary.
async fn database_url(pool: &PgPool) -> String {
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(pool)
        .await
        .unwrap();
    let mut url = reqwest::Url::parse(&std::env::var("DATABASE_URL").unwrap()).unwrap();
    url.set_path(&name);
    url.to_string()
}

async fn run_binary(url: &str) -> (bool, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_statki"))
        .arg("verify")
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.success(), format!("{stdout}{stderr}"))
}

#[sqlx::test]
async fn the_binary_exits_non_zero_on_a_mismatch(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let id = ranked(&app, &a, &b, "statki").await;
    resign(&app, &id, &a).await;
    let url = database_url(&app.pool).await;

    let (success, output) = run_binary(&url).await;
    assert!(success, "{output}");
    assert!(
        output.contains("verified 1 matches (1 finished, 1 ranked)"),
        "{output}"
    );
    assert!(output.contains("OK"), "{output}");

    sqlx::query("UPDATE matches SET phase = 'cancelled' WHERE id = $1::uuid")
        .bind(&id)
        .execute(&app.pool)
        .await
        .unwrap();
    let (success, output) = run_binary(&url).await;
    assert!(!success, "{output}");
    assert!(
        output.contains(&format!("MISMATCH match {id}: column `phase`")),
        "{output}"
    );
}

/// A match in placement where `a` and then `b` react, and `a` again `gap_ms` later; then
/// `b` resigns. The log is written as one batch at the database's time, as the service's
/// write would, except that the second reaction of `a` is stored `gap_ms` after the rest.
async fn write_reactions(app: &TestApp, a: &Player, b: &Player, gap_ms: i64) -> String {
    use statki::engine::Reaction;
    let Created {
        a,
        b,
        now,
        mut log,
        mut state,
        draw,
    } = created(app, a, b).await;
    let later = now + chrono::Duration::milliseconds(gap_ms);
    let react = |reaction| Command::React { reaction };
    log.extend(state.execute(b, &Command::Join, now, draw).unwrap());
    log.extend(
        state
            .execute(a, &react(Reaction::GoodLuck), now, draw)
            .unwrap(),
    );
    log.extend(
        state
            .execute(b, &react(Reaction::GoodLuck), now, draw)
            .unwrap(),
    );
    let early = log.len();
    // Decided as if the gap had passed, so the fold takes it; only the referee's re-check
    // against the stored time can tell.
    let allowed = now + chrono::Duration::seconds(3);
    log.extend(
        state
            .execute(a, &react(Reaction::Oops), allowed, draw)
            .unwrap(),
    );
    log.extend(state.execute(b, &Command::Resign, later, draw).unwrap());
    let id = insert_row(app, &state, log.len(), now).await;
    statki::store::events::append(&app.pool, id, 0, now, &log[..early])
        .await
        .unwrap();
    // The later events carry the time they were decided at only when the gap is honest.
    let stored_at = if gap_ms >= 3_000 { allowed } else { later };
    statki::store::events::append(&app.pool, id, early as i64, stored_at, &log[early..])
        .await
        .unwrap();
    id.to_string()
}

#[sqlx::test]
async fn reactions_are_re_refereed_against_their_gap(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.register(&unique("ala")).await;
    let b = app.register(&unique("bolek")).await;
    let honest = write_reactions(&app, &a, &b, 3_000).await;
    let report = verify::run(&app.pool).await.unwrap();
    assert!(report.ok(), "the honest reactions verify: {report}");

    let hasty = write_reactions(&app, &a, &b, 1_000).await;
    let report = verify::run(&app.pool).await.unwrap();
    assert_eq!(report.mismatches.len(), 1, "{report}");
    assert!(
        flagged(&report, &hasty, "(reaction) is refused by the rules"),
        "{report}"
    );
    assert!(!flagged(&report, &honest, ""));
}
