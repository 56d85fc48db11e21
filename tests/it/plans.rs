//! Plans that do not depend on fresh statistics: on a database created by the migrations and
//! filled to 10,000 matches in play with no `ANALYZE` ever (autovacuum off, as on a machine
//! that runs without it: the only statistics are what the migrations left, such as three
//! players on one page), every hot-path statement (commands, the view, the event page,
//! stream catch-up and the fan-out's reads, the sweeps) is planned through its index, as a
//! custom plan and as the generic plan a prepared statement keeps. And a generic plan made
//! while the tables were empty, which a connection keeps for its life, still uses the
//! indexes once they are full, in a session with the service's settings.

use sqlx::PgPool;
use uuid::Uuid;

use crate::common::{explain_execute, prepare};
use crate::distributable::{normalise, statements};

/// Matches in play.
const MATCHES: i64 = 10_000;
/// Events per match.
const EVENTS: i64 = 12;

/// A distinctive fragment of each hot statement (lower case, whitespace collapsed, as in
/// `distributable`) and arguments for it: `$MATCH` and `$PLAYER` are a match and a player
/// of the fill.
const HOT: &[(&str, &str)] = &[
    // A command batch: its lock, its write.
    (
        "from matches where id = any($1) order by id for update",
        "ARRAY['$MATCH']::uuid[]",
    ),
    (
        "with locked as (",
        "now(), ARRAY['$MATCH']::uuid[], ARRAY[13]::bigint[], ARRAY['$PLAYER']::uuid[], \
         ARRAY['shot_fired'], ARRAY['{}']::jsonb[], ARRAY['$MATCH']::uuid[], ARRAY['battle'], \
         ARRAY['$PLAYER']::uuid[], ARRAY['$PLAYER']::uuid[], ARRAY[now()], \
         ARRAY[NULL]::uuid[], ARRAY[NULL]::text[], ARRAY[13]::bigint[], ARRAY['{}']::jsonb[], \
         '{}'::uuid[], '{}'::text[], '{}'::jsonb[], '{}'::uuid[], '{}'::text[], \
         ARRAY[12]::bigint[], ARRAY[NULL]::timestamptz[], 1, 1, ARRAY['$PLAYER']::uuid[], \
         ARRAY[NULL]::uuid[], '{}'::uuid[], '{}'::uuid[]",
    ),
    // The view, a stream's head, and who is online.
    ("from matches m where m.id = $1", "'$MATCH'"),
    (
        "select distinct player_id from stream_leases",
        "ARRAY['$PLAYER']::uuid[], interval '1 minute'",
    ),
    (
        "select id from players where id = any($1) and bot_level is not null",
        "ARRAY['$PLAYER']::uuid[]",
    ),
    // The event page and a stream's catch-up.
    (
        "select seq, at, payload from match_events where match_id = $1 and seq > $2",
        "'$MATCH', 3, 500",
    ),
    (
        "from player_notices where player_id = $1 and seq > $2",
        "'$PLAYER', 0, 500",
    ),
    // The fan-out's coalesced reads.
    (
        "from matches m where m.id = any($1)",
        "ARRAY['$MATCH']::uuid[]",
    ),
    (
        "join match_events e on e.match_id = f.id",
        "ARRAY['$MATCH']::uuid[], ARRAY[3]::bigint[], ARRAY[12]::bigint[]",
    ),
    (
        "join player_notices n",
        "ARRAY['$PLAYER']::uuid[], ARRAY[0]::bigint[], 500",
    ),
    // The sweeps: followed positions, due clocks.
    (
        "select id, last_seq from matches where id = any($1)",
        "ARRAY['$MATCH']::uuid[]",
    ),
    (
        "select player_id, max(seq) as seq from player_notices",
        "ARRAY['$PLAYER']::uuid[]",
    ),
    ("from matches where wake_at <= $1", "now(), 32"),
    (
        "join matches m on m.id = d.match_id",
        "now(), now(), now(), 16",
    ),
    (
        "from rematch_offers o where o.bot is not null",
        "now(), now(), 16",
    ),
    // A notice, with the names of the players it names.
    (
        "insert into player_notices (player_id, seq, kind, payload)",
        "'$PLAYER', 'challenge', '{\"from\": \"$PLAYER\"}'",
    ),
    // A new match's row, with its players' names.
    (
        "from inserted i join players p",
        "'$MATCH', 'statki', false, 'waiting', '$PLAYER', NULL, NULL, NULL, NULL, NULL, NULL, \
         1, '{}', now(), '$PLAYER', '$PLAYER'",
    ),
];

/// Tables the fill makes large: a sequential scan of any of them is what must not happen.
const LARGE: &[&str] = &[
    "matches",
    "match_events",
    "player_notices",
    "stream_leases",
    "players",
    "player_matches",
];

async fn fill(pool: &PgPool, from: i64, to: i64) {
    let mut conn = pool.acquire().await.unwrap();
    sqlx::raw_sql("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO players (id, name, name_key)
         SELECT gen_random_uuid(), 'p' || g, 'p' || g FROM generate_series($1 * 2 + 1, $2 * 2) AS g",
    )
    .bind(from)
    .bind(to)
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query(
        "WITH new AS (
             SELECT id, row_number() OVER (ORDER BY id) AS n FROM players p
             WHERE bot_level IS NULL
               AND NOT EXISTS (SELECT FROM player_matches pm WHERE pm.player_id = p.id)
         ), pairs AS (
             SELECT a.id AS creator, b.id AS joiner FROM new a JOIN new b ON b.n = a.n + 1
             WHERE a.n % 2 = 1
         ), made AS (
             INSERT INTO matches (id, ruleset, ranked, phase, creator, joiner, turn, deadline,
                                  wake_at, last_seq, snapshot, created_at, updated_at)
             SELECT gen_random_uuid(), 'statki', false, 'battle', creator, joiner, creator,
                    now() + interval '1 hour', now() + interval '1 hour', $1, '{}'::jsonb,
                    now(), now()
             FROM pairs
             RETURNING id, creator, joiner
         ), rows AS (
             INSERT INTO player_matches (player_id, match_id, role, ruleset, ranked, status,
                                         created_at)
             SELECT creator, id, 'creator', 'statki', false, 'playing', now() FROM made
             UNION ALL SELECT joiner, id, 'joiner', 'statki', false, 'playing', now() FROM made
         )
         INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
         SELECT id, seq, now(), creator, 'shot_fired', '{}'::jsonb
         FROM made, generate_series(1, $1) AS seq",
    )
    .bind(EVENTS)
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO player_notices (player_id, seq, kind, payload)
         SELECT id, 1, 'challenge', '{}'::jsonb FROM players p
         WHERE bot_level IS NULL
           AND NOT EXISTS (SELECT FROM player_notices n WHERE n.player_id = p.id)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO stream_leases (id, player_id, replica_id, renewed_at)
         SELECT gen_random_uuid(), id, gen_random_uuid(), now() FROM players p
         WHERE bot_level IS NULL
           AND NOT EXISTS (SELECT FROM stream_leases l WHERE l.player_id = p.id)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::raw_sql("RESET session_replication_role")
        .execute(&mut *conn)
        .await
        .unwrap();
}

/// The plan of `sql` with `args`, as a custom plan and as a generic one.
async fn plans(pool: &PgPool, sql: &str, args: &str) -> [String; 2] {
    let mut conn = pool.acquire().await.unwrap();
    let name = prepare(&mut conn, sql).await;
    let mut plans = Vec::new();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET plan_cache_mode = {mode}")))
            .execute(&mut *conn)
            .await
            .unwrap();
        plans.push(explain_execute(&mut conn, &name, args).await);
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DEALLOCATE {name}; RESET plan_cache_mode"
    )))
    .execute(&mut *conn)
    .await
    .unwrap();
    [plans.remove(0), plans.remove(0)]
}

async fn without_autovacuum(pool: &PgPool) {
    for table in LARGE.iter().chain(&["bot_turns", "match_command_keys"]) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {table} SET (autovacuum_enabled = off)"
        )))
        .execute(pool)
        .await
        .unwrap();
    }
}

/// The hot statements HOT names, each with its arguments for `match_id` and `player`.
fn hot_statements(match_id: Uuid, player: Uuid) -> Vec<(&'static str, String, String)> {
    let all = statements();
    let mut hot = Vec::new();
    for (fragment, args) in HOT {
        let found: Vec<_> = all
            .iter()
            .filter(|statement| normalise(&statement.sql).contains(fragment))
            .collect();
        assert!(
            !found.is_empty(),
            "no statement in src/store contains `{fragment}` any more: update HOT"
        );
        let args = args
            .replace("$MATCH", &match_id.to_string())
            .replace("$PLAYER", &player.to_string());
        for statement in found {
            hot.push((*fragment, statement.sql.clone(), args.clone()));
        }
    }
    hot
}

/// What is wrong with `plan` of the statement `fragment` names: the large tables it scans
/// sequentially, if any.
fn scan_failure(fragment: &str, plan: &str) -> Option<String> {
    let scanned: Vec<&str> = LARGE
        .iter()
        .copied()
        .filter(|table| plan.contains(&format!("Seq Scan on {table} ")))
        .collect();
    (!scanned.is_empty()).then(|| format!("`{fragment}` scans {scanned:?}:\n{plan}"))
}

/// A match of the fill, in the middle of the ids, and its creator.
async fn a_match_and_its_creator(pool: &PgPool) -> (Uuid, Uuid) {
    sqlx::query_as("SELECT id, creator FROM matches ORDER BY id OFFSET 5000 LIMIT 1")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn generic_plans_made_while_the_tables_were_empty_use_the_indexes_once_full(pool: PgPool) {
    without_autovacuum(&pool).await;
    let mut session = pool.acquire().await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "{}; SET plan_cache_mode = force_generic_plan",
        statki::store::SESSION_SETTINGS
    )))
    .execute(&mut *session)
    .await
    .unwrap();
    let mut prepared = Vec::new();
    for (fragment, sql, args) in hot_statements(Uuid::new_v4(), Uuid::new_v4()) {
        let name = prepare(&mut session, &sql).await;
        // Executed once while empty: the plan the connection keeps from now on.
        explain_execute(&mut session, &name, &args).await;
        prepared.push((fragment, name));
    }
    fill(&pool, 0, MATCHES).await;
    let (match_id, player) = a_match_and_its_creator(&pool).await;
    let mut failures = Vec::new();
    for ((fragment, name), (_, _, args)) in
        prepared.into_iter().zip(hot_statements(match_id, player))
    {
        let plan = explain_execute(&mut session, &name, &args).await;
        failures.extend(scan_failure(fragment, &plan));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[sqlx::test]
async fn hot_statements_use_their_indexes_with_no_statistics_taken(pool: PgPool) {
    without_autovacuum(&pool).await;
    fill(&pool, 0, MATCHES).await;
    let in_play: i64 = sqlx::query_scalar("SELECT count(*) FROM matches")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(in_play, MATCHES);
    let (match_id, player) = a_match_and_its_creator(&pool).await;

    let mut failures = Vec::new();
    for (fragment, sql, args) in hot_statements(match_id, player) {
        for plan in plans(&pool, &sql, &args).await {
            failures.extend(scan_failure(fragment, &plan));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
