//! Statki on Citus (migrations/0030_citus.sql, docs/scaling.md): the tables are
//! distributed as planned, every hot-path statement of `src/store/` is planned on one shard,
//! and the event log's append-only triggers exist on every shard.
//!
//! These tests need a database where the `citus` extension exists: `scripts/test` runs
//! the integration tests a second time against `scripts/citus up --workers 2`. On plain
//! PostgreSQL they check that migration 0030 left everything undistributed.

use sqlx::PgPool;
use uuid::Uuid;

use crate::distributable::{normalise, statements};

/// Hot-path statements, by a fragment of their text (lower case, whitespace collapsed; every
/// statement of `src/store/` containing it is checked, or with a leading `=` the one that is
/// exactly it), with arguments for `EXECUTE`.
const HOT_PATH: &[(&str, &str)] = &[
    // A command: lock the match (or read it), write its row, append its events, its bot turn.
    ("from matches where id = $1 for update", "'$MATCH'"),
    (
        "=select id, snapshot, last_seq, created_at from matches where id = $1",
        "'$MATCH'",
    ),
    // The sweeps' claim of one match they found due (clock and bot worker).
    (
        "from matches where id = $1 and wake_at <= $2 for update skip locked",
        "'$MATCH', now()",
    ),
    (
        "join bot_turns t on t.match_id = m.id",
        "'$MATCH', now(), now(), now()",
    ),
    (
        "update matches set phase = $2, joiner = $3, turn = $4, deadline = $5,",
        "'$MATCH', 'battle', NULL, NULL, now(), NULL, NULL, 3, '{}', now(), 2",
    ),
    (
        "insert into match_events (match_id, seq, at, actor, kind, payload) values ($1, $2, $3, $4, $5, $6)",
        "'$MATCH', 3, now(), NULL, 'shot_fired', '{}'",
    ),
    (
        "insert into bot_turns (match_id, bot, setup, since, deadline) values ($1, $2, $3, $4, $5)",
        "'$MATCH', '$MATCH', false, now(), now()",
    ),
    ("delete from bot_turns where match_id = $1", "'$MATCH'"),
    (
        "select id from players where id in ($1, $2) and bot_level is not null",
        "'$MATCH', NULL",
    ),
    // A ranked result's rating rows.
    (
        "insert into rating_changes (match_id, seq, player_id, opponent_id, ruleset, at, score,",
        "'$MATCH', 9, '$MATCH', '$MATCH', 'statki', now(), 'win', 1, 1500, 350, 0.06, 1600, 300, 0.06",
    ),
    // Reading a match's events (`/events`, stream catch-up, fan-out) and its position.
    (
        "select seq, at, payload from match_events where match_id = $1 and seq > $2",
        "'$MATCH', 0, 100",
    ),
    (
        "select id, last_seq from matches where id = any($1)",
        "ARRAY['$MATCH']::uuid[]",
    ),
    // Its rematch offers.
    (
        "from rematch_offers where match_id = $1 and expires_at > $2",
        "'$MATCH', now()",
    ),
    (
        "select rematch_id from rematches where match_id = $1",
        "'$MATCH'",
    ),
];

async fn distributed(pool: &PgPool) -> bool {
    let mut conn = pool.acquire().await.expect("a connection");
    statki::store::citus::distributed(&mut conn)
        .await
        .expect("ask for the citus extension")
}

/// The distributed and reference tables: `(table, kind)`.
async fn distribution(pool: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT table_name::text, citus_table_type FROM citus_tables
         WHERE citus_table_type <> 'local' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .expect("read pg_dist_partition")
}

#[sqlx::test]
async fn the_per_match_tables_are_distributed_by_match_on_citus(pool: PgPool) {
    if !distributed(&pool).await {
        let citus: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM pg_proc WHERE proname = 'create_distributed_table')",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(!citus, "no citus extension, yet Citus functions exist");
        eprintln!("plain PostgreSQL: migration 0030 distributed nothing, as it should");
        return;
    }
    let tables = distribution(&pool).await;
    let expected: Vec<(String, String)> = [
        ("bot_turns", "distributed"),
        ("match_events", "distributed"),
        ("matches", "distributed"),
        ("players", "reference"),
        ("rating_changes", "distributed"),
        ("ratings", "reference"),
        ("rematch_offers", "distributed"),
        ("rematches", "distributed"),
    ]
    .iter()
    .map(|(t, m)| (t.to_string(), m.to_string()))
    .collect();
    assert_eq!(tables, expected);
    // One co-location group: a match's rows are on one worker.
    let groups: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE partmethod = 'h'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(groups, 1, "the per-match tables are not co-located");
}

/// Plans `sql` with `args` and returns the task counts of its distributed scans and
/// whether it needed subplans (both mean more than one shard's work).
async fn shards_touched(pool: &PgPool, sql: &str, args: &str) -> (Vec<u64>, bool, String) {
    let mut conn = pool.acquire().await.unwrap();
    let name = format!("hot_{}", Uuid::new_v4().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("PREPARE {name} AS {sql}")))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("PREPARE {sql}: {e}"));
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN EXECUTE {name}({args})"
    )))
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_else(|e| panic!("EXPLAIN {sql} with ({args}): {e}"));
    let plan = plan.join("\n");
    let tasks = plan
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Task Count: "))
        .map(|count| count.trim().parse().expect("a task count"))
        .collect();
    let subplans = plan.contains("Distributed Subplan");
    (tasks, subplans, plan)
}

#[sqlx::test]
async fn every_hot_path_statement_is_planned_on_one_shard(pool: PgPool) {
    if !distributed(&pool).await {
        eprintln!("plain PostgreSQL: nothing is distributed, every statement is one server's");
        return;
    }
    let all = statements();
    let match_id = Uuid::new_v4().to_string();
    let mut checked = 0;
    let mut spread = Vec::new();
    for (fragment, args) in HOT_PATH {
        let found: Vec<_> = all
            .iter()
            .filter(|statement| {
                let sql = normalise(&statement.sql);
                match fragment.strip_prefix('=') {
                    Some(exact) => sql == exact,
                    None => sql.contains(fragment),
                }
            })
            .collect();
        assert!(
            !found.is_empty(),
            "no statement in src/store contains `{fragment}` any more: update HOT_PATH"
        );
        let args = args.replace("$MATCH", &match_id);
        for statement in found {
            let (tasks, subplans, plan) = shards_touched(&pool, &statement.sql, &args).await;
            checked += 1;
            assert!(
                !tasks.is_empty(),
                "no distributed scan in the plan of {}:\n{plan}",
                statement.sql
            );
            if subplans || tasks.iter().any(|&n| n > 1) {
                spread.push(format!(
                    "{}: {}\n{plan}",
                    statement.file.display(),
                    normalise(&statement.sql)
                ));
            }
        }
    }
    // The check tells a statement of every shard from one of a single shard: the clock
    // sweep's find is planned on all of them.
    let (tasks, _, plan) = shards_touched(
        &pool,
        "SELECT id FROM matches WHERE wake_at <= $1 ORDER BY wake_at LIMIT $2",
        "now(), 10",
    )
    .await;
    assert!(
        tasks.iter().any(|&n| n > 1),
        "a sweep planned on one shard?\n{plan}"
    );
    assert!(
        spread.is_empty(),
        "hot-path statements planned on more than one shard:\n{}",
        spread.join("\n\n")
    );
    eprintln!("{checked} hot-path statements, each planned on one shard");
}

#[sqlx::test]
async fn the_append_only_triggers_exist_on_every_shard(pool: PgPool) {
    if !distributed(&pool).await {
        eprintln!("plain PostgreSQL: the triggers are the tables' own (tests/it/store.rs)");
        return;
    }
    for (table, trigger) in [
        ("match_events", "match_events_append_only"),
        ("match_events", "match_events_no_truncate"),
        ("rating_changes", "rating_changes_append_only"),
        ("rating_changes", "rating_changes_no_truncate"),
    ] {
        let (shards, with_trigger): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT count(*), count(*) FILTER (WHERE success AND result = '1')
             FROM run_command_on_shards('{table}',
                 $cmd$SELECT count(*) FROM pg_trigger
                      WHERE tgrelid = '%s'::regclass AND tgname LIKE '{trigger}%%'$cmd$)"
        )))
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(shards > 1, "{table} has {shards} shards");
        assert_eq!(
            with_trigger, shards,
            "{trigger} is missing on some shards of {table}"
        );
    }
}
