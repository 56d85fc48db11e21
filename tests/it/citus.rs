//! Statki on Citus (migrations/0030_citus.sql, docs/scaling.md): the tables are
//! distributed as planned, every hot-path statement of `src/store/` is planned on one shard,
//! and the event log's append-only triggers exist on every shard.
//!
//! These tests need a database where the `citus` extension exists: `scripts/test` runs
//! the integration tests a second time against `scripts/citus up --workers 2`. On plain
//! PostgreSQL they check that migration 0030 left everything undistributed.

use sqlx::{Connection, PgPool};
use uuid::Uuid;

use crate::common;
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
    // The keys of commands on a match, on the match's shard: claim, replay, answer, give back.
    (
        "insert into match_command_keys (match_id, player_id, key, request_hash) values ($1, $2, $3, $4)",
        "'$MATCH', '$MATCH', 'k', 'h'",
    ),
    (
        "select request_hash, response from match_command_keys where match_id = $1",
        "'$MATCH', '$MATCH', 'k'",
    ),
    (
        "update match_command_keys set response = $4 where match_id = $1",
        "'$MATCH', '$MATCH', 'k', '{}'",
    ),
    (
        "delete from match_command_keys where match_id = $1 and player_id = $2 and key = $3",
        "'$MATCH', '$MATCH', 'k'",
    ),
];

/// Reads by player, each on the one shard of `player_matches` holding the player ($PLAYER).
const BY_PLAYER: &[(&str, &str)] = &[
    // A player's matches, a page after a cursor (the first page and page 50 alike).
    (
        "select match_id from player_matches where player_id = $1 and role <> 'invited'",
        "'$PLAYER', now(), '$PLAYER', 21",
    ),
    // Their record, kept beside their rows.
    (
        "select wins, losses, draws from player_records where player_id = $1",
        "'$PLAYER'",
    ),
    // Already in a running match? (the queue, and each candidate of the opponent search).
    (
        "select exists (select 1 from player_matches where player_id = $1 and status = 'playing'",
        "'$PLAYER'",
    ),
    // The caps on open matches and waiting challenges.
    (
        "where player_id = $1 and role = 'creator'",
        "'$PLAYER', now()",
    ),
    (
        "where player_id = $1 and role = 'invited' and status = 'waiting'",
        "'$PLAYER'",
    ),
];

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
    if !common::on_citus(&pool).await {
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
        ("match_command_keys", "distributed"),
        ("match_events", "distributed"),
        ("matches", "distributed"),
        ("player_matches", "distributed"),
        ("player_records", "distributed"),
        ("players", "reference"),
        ("rating_buckets", "reference"),
        ("rating_changes", "distributed"),
        ("ratings", "reference"),
        ("rematch_offers", "distributed"),
        ("rematches", "distributed"),
    ]
    .iter()
    .map(|(t, m)| (t.to_string(), m.to_string()))
    .collect();
    assert_eq!(tables, expected);
    // One co-location group: a match's rows are on one worker. `player_matches` and
    // `player_records`, by player, are a group of their own.
    let groups: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT colocationid) FROM pg_dist_partition
         WHERE partmethod = 'h'
           AND logicalrelid NOT IN ('player_matches'::regclass, 'player_records'::regclass)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(groups, 1, "the per-match tables are not co-located");
    let by_player: Vec<(String, i64)> = sqlx::query_as(
        "SELECT column_to_column_name(logicalrelid, partkey), count(DISTINCT colocationid)
         FROM pg_dist_partition
         WHERE logicalrelid IN ('player_matches'::regclass, 'player_records'::regclass)
         GROUP BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        by_player,
        [("player_id".to_owned(), 1)],
        "a player's records are not beside their rows"
    );
}

/// Plans `sql` with `args` and returns the task counts of its distributed scans and
/// whether it needed subplans (both mean more than one shard's work).
async fn shards_touched(pool: &PgPool, sql: &str, args: &str) -> (Vec<u64>, bool, String) {
    let mut conn = pool.acquire().await.unwrap();
    let name = common::prepare(&mut conn, sql).await;
    let plan = common::explain_execute(&mut conn, &name, args).await;
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
    if !common::on_citus(&pool).await {
        eprintln!("plain PostgreSQL: nothing is distributed, every statement is one server's");
        return;
    }
    let all = statements();
    let match_id = Uuid::new_v4().to_string();
    let player_id = Uuid::new_v4().to_string();
    let mut checked = 0;
    let mut spread = Vec::new();
    for (fragment, args) in HOT_PATH.iter().chain(BY_PLAYER) {
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
        let args = args
            .replace("$MATCH", &match_id)
            .replace("$PLAYER", &player_id);
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
    if !common::on_citus(&pool).await {
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

/// The worker group Citus keeps `match_id`'s shard on.
async fn worker_of(pool: &PgPool, match_id: Uuid) -> i32 {
    sqlx::query_scalar(
        "SELECT groupid FROM pg_dist_placement
         WHERE shardid = get_shard_id_for_distribution_column('matches', $1)",
    )
    .bind(match_id)
    .fetch_one(pool)
    .await
    .expect("the shard placement of a match")
}

#[sqlx::test]
async fn the_group_commit_places_matches_as_citus_does(pool: PgPool) {
    if !common::on_citus(&pool).await {
        eprintln!("plain PostgreSQL: one server, no placements");
        return;
    }
    let mut conn = pool.acquire().await.unwrap();
    let placements = statki::store::citus::placements(&mut conn).await.unwrap();
    assert_eq!(placements.workers().len(), 2, "{placements:?}");
    for _ in 0..200 {
        let id = Uuid::now_v7();
        let citus: i32 = sqlx::query_scalar("SELECT worker_hash($1::uuid)")
            .bind(id)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(statki::store::citus::match_hash(id), citus, "{id}");
        assert_eq!(placements.worker_of(id), Some(worker_of(&pool, id).await));
    }
}

/// Transactions Citus committed with two-phase commit in this database (recovery is off
/// on the test cluster, so their records stay).
async fn two_phase_commits(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_dist_transaction")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The matchmaking sweep runs every two seconds on every replica: with nothing due it must
/// not write on the workers (a delete of every shard was a two-phase commit each time).
#[sqlx::test]
async fn a_matchmaking_sweep_with_nothing_due_commits_nothing_in_two_phases(pool: PgPool) {
    use crate::ladder_support::{matchmaking_ahead, resign, started};
    use serde_json::json;

    if !common::on_citus(&pool).await {
        eprintln!("plain PostgreSQL: one server, nothing to commit in two phases");
        return;
    }
    let app = common::spawn_app(pool.clone()).await;
    let a = app.register(&common::unique("ala")).await;
    let b = app.register(&common::unique("bolek")).await;
    let id = started(&app, &a, &b, json!({})).await;
    resign(&app, &id, &a).await;
    let path = format!("/v1/matches/{id}/rematch");
    assert_eq!(
        app.post(&path, &a.token, json!({})).await.body["status"],
        "offered"
    );
    // A delete of every shard is a two-phase commit in every sweep; other commits of the
    // database (the commands' own, landing late on a loaded machine) come at other times.
    // So the sweep passes when one of a few sweeps moved nothing.
    let mut moved = Vec::new();
    for _ in 0..5 {
        let before = two_phase_commits(&pool).await;
        assert_eq!(matchmaking_ahead(&app, 0).await.purged, 0);
        let after = two_phase_commits(&pool).await;
        if after == before {
            break;
        }
        moved.push(after - before);
    }
    assert!(
        moved.len() < 5,
        "every idle sweep committed in two phases (records added per sweep: {moved:?})"
    );
    // Once the offer is due it is deleted on its shard.
    assert_eq!(matchmaking_ahead(&app, 121).await.purged, 1);
}

#[sqlx::test]
async fn keyed_shots_on_both_workers_commit_without_two_phase_commit_or_deadlock(pool: PgPool) {
    use crate::common::spawn_app;
    use reqwest::StatusCode;
    use serde_json::json;

    if !common::on_citus(&pool).await {
        eprintln!("plain PostgreSQL: one server, nothing to commit in two phases");
        return;
    }
    let app = spawn_app(pool.clone()).await;
    let mut battles = Vec::new();
    let mut on_worker = std::collections::BTreeMap::<i32, usize>::new();
    while battles.len() < 40 && (on_worker.len() < 2 || on_worker.values().any(|&n| n < 6)) {
        let (id, shooter, other) = app.battle_match("classic").await;
        let worker = worker_of(&pool, id.parse().unwrap()).await;
        *on_worker.entry(worker).or_default() += 1;
        battles.push((id, shooter, other));
    }
    assert!(
        on_worker.len() == 2 && on_worker.values().all(|&n| n >= 6),
        "matches on each worker: {on_worker:?}"
    );
    let before = two_phase_commits(&pool).await;
    // Every shooter fires at once with a key, each shot sent twice (a retry racing its
    // first try), and the other player sends a fleet in battle (refused, its key given
    // back): batches of matches on both workers, all at the same time.
    let shots = battles.iter().flat_map(|(id, shooter, other)| {
        let key = format!("shot-{id}");
        let fire = |key: String| {
            app.send(
                app.client
                    .post(app.url(&format!("/v1/matches/{id}/shots")))
                    .bearer_auth(&shooter.token)
                    .header("idempotency-key", key)
                    .json(&json!({ "cell": "A1" })),
            )
        };
        let refused = app.send(
            app.client
                .put(app.url(&format!("/v1/matches/{id}/fleet")))
                .bearer_auth(&other.token)
                .header("idempotency-key", format!("fleet-{id}"))
                .json(&crate::common::legal_fleet("classic")),
        );
        [
            futures::future::Either::Left(fire(key.clone())),
            futures::future::Either::Left(fire(key)),
            futures::future::Either::Right(refused),
        ]
    });
    let answers = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        futures::future::join_all(shots),
    )
    .await
    .expect("concurrent commands deadlocked (no answer within 120 s)");
    for (index, answer) in answers.iter().enumerate() {
        if index % 3 == 2 {
            assert_eq!(answer.status, StatusCode::CONFLICT, "{:?}", answer.body);
        } else {
            assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        }
    }
    for pair in answers.chunks(3) {
        assert_eq!(pair[0].body, pair[1].body, "a retry answered differently");
    }
    let after = two_phase_commits(&pool).await;
    assert_eq!(
        after, before,
        "keyed shots were committed with two-phase commit"
    );
    // Each match took its one shot.
    for (id, _, _) in &battles {
        let shots: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM match_events WHERE match_id = $1 AND kind = 'shot_fired'",
        )
        .bind(id.parse::<Uuid>().unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(shots, 1, "{id}");
    }
    eprintln!(
        "{} keyed shots over {on_worker:?} matches per worker: no two-phase commit, no deadlock",
        battles.len()
    );
}

/// Issue 38, item 1: on Citus the auditor reads no running match's placements or salts by
/// any path. Before, `run_command_on_shards` (and the other functions that run SQL on the
/// nodes) read every shard as the auditor, and the auditor could log in to a worker and
/// read the shards directly. Now those functions are refused to it (deploy/citus-lockdown.sql),
/// nobody logs in as `statki_auditor` or `statki_app` (their passwords are the servers'),
/// an operator's own login granted the auditor role reaches the coordinator only, and the
/// auditor's row policy on `matches` holds on the workers' shards too.
#[sqlx::test]
async fn the_auditor_reads_no_running_fleet_on_any_node(pool: PgPool) {
    if !common::on_citus(&pool).await {
        return;
    }
    let app = common::spawn_app(pool.clone()).await;
    let (id, _, _) = app.battle_match("classic").await;
    let id: Uuid = id.parse().unwrap();
    let salts: Vec<String> = sqlx::query_scalar(
        "SELECT payload->>'salt' FROM match_events WHERE match_id = $1 AND kind = 'fleet_locked'",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(salts.len(), 2, "both fleets are locked");
    let placements: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM match_events
         WHERE match_id = $1 AND kind = 'ship_placed' AND payload ? 'placement'",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(placements > 0, "the placements are stored");
    let shard = |table: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (String, i32)>(
                "SELECT shard_name::text, nodeport FROM citus_shards
                 WHERE table_name = $1::regclass
                   AND shardid = get_shard_id_for_distribution_column($1::regclass, $2)",
            )
            .bind(table)
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let (events_shard, worker_port) = shard("match_events").await;
    let (matches_shard, _) = shard("matches").await;
    let dump = format!("SELECT coalesce(string_agg(payload::text, ' '), '') FROM {events_shard}");
    let on_every_node = format!(
        "SELECT coalesce(string_agg(result, ' '), '') FROM run_command_on_all_nodes($${dump}$$)"
    );
    let on_workers = format!(
        "SELECT coalesce(string_agg(result, ' '), '') FROM run_command_on_workers($${dump}$$)"
    );
    let on_worker = format!(
        "SELECT coalesce(string_agg(result, ' '), '') FROM master_run_on_worker(
             ARRAY['127.0.0.1'], ARRAY[{worker_port}], ARRAY[$${dump}$$], false)"
    );
    let paths: Vec<String> = vec![
        "SELECT coalesce(string_agg(result, ' '), '') FROM run_command_on_shards('match_events',
             $$SELECT coalesce(string_agg(payload::text, ' '), '') FROM %s$$)"
            .into(),
        "SELECT coalesce(string_agg(result, ' '), '') FROM run_command_on_placements('match_events',
             $$SELECT coalesce(string_agg(payload::text, ' '), '') FROM %s$$)"
            .into(),
        "SELECT coalesce(string_agg(result, ' '), '') FROM run_command_on_colocated_placements(
             'matches', 'match_events',
             $$SELECT coalesce(string_agg(e.payload::text, ' '), '') FROM %s m, %s e$$)"
            .into(),
        on_every_node,
        on_workers,
        on_worker,
        "SELECT coalesce(string_agg(result, ' '), '') FROM run_command_on_coordinator(
             $$SELECT 1$$)"
            .into(),
    ];
    for path in &paths {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SET LOCAL ROLE statki_auditor")
            .execute(&mut *tx)
            .await
            .unwrap();
        let read: Result<String, _> = sqlx::query_scalar(sqlx::AssertSqlSafe(path.as_str()))
            .fetch_one(&mut *tx)
            .await;
        tx.rollback().await.unwrap();
        let error = read.expect_err(path);
        let code = error.as_database_error().and_then(|e| e.code());
        assert_eq!(code.as_deref(), Some("42501"), "{path}: {error}");
    }

    // Nobody logs in as the service's or the auditor's role, on any node; an operator's
    // own login, granted the auditor role, reaches the coordinator only.
    let connect = (*pool.connect_options()).clone();
    let database = connect.get_database().unwrap().to_owned();
    let nodes: Vec<i32> = sqlx::query_scalar(
        "SELECT nodeport FROM pg_dist_node WHERE isactive AND noderole = 'primary' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let coordinator = i32::from(connect.get_port());
    assert!(
        nodes.len() >= 3 && nodes.contains(&coordinator),
        "{nodes:?}"
    );
    let operator = format!("op_{}", Uuid::new_v4().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {operator} LOGIN PASSWORD 'audit-pass'; GRANT statki_auditor TO {operator}"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let login = |port: i32, role: &str, password: Option<&str>| {
        let mut options = sqlx::postgres::PgConnectOptions::new_without_pgpass()
            .host("127.0.0.1")
            .port(port as u16)
            .username(role)
            .database(&database);
        if let Some(password) = password {
            options = options.password(password);
        }
        async move { sqlx::PgConnection::connect_with(&options).await }
    };
    for &port in &nodes {
        for role in ["statki_auditor", "statki_app"] {
            for password in [None, Some(""), Some(role)] {
                assert!(
                    login(port, role, password).await.is_err(),
                    "{role} logged in to node {port} with {password:?}"
                );
            }
        }
        let operator_login = login(port, &operator, Some("audit-pass")).await;
        assert_eq!(
            operator_login.is_ok(),
            port == coordinator,
            "an operator's login on node {port} (the coordinator is {coordinator})"
        );
    }
    // On the coordinator, the operator as the auditor reads nothing of the running match.
    let mut conn = login(coordinator, &operator, Some("audit-pass"))
        .await
        .unwrap();
    sqlx::query("SET ROLE statki_auditor")
        .execute(&mut conn)
        .await
        .unwrap();
    for read in [
        "SELECT count(*) FROM match_log WHERE match_id = $1",
        "SELECT count(*) FROM matches WHERE id = $1",
    ] {
        let rows: i64 = sqlx::query_scalar(read)
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(rows, 0, "{read}");
    }
    let everything: String =
        sqlx::query_scalar("SELECT coalesce(string_agg(l::text, ' '), '') FROM match_log l")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(
        !salts.iter().any(|salt| everything.contains(salt.as_str())),
        "a running match's salt in match_log"
    );
    assert!(
        sqlx::query("SELECT * FROM match_events")
            .fetch_all(&mut conn)
            .await
            .is_err(),
        "the event log itself is refused to the auditor"
    );
    conn.close().await.unwrap();

    // On the worker holding the match, row security keeps its row of `matches` from the
    // auditor role as on the coordinator (reached there only through Citus's own
    // connections for the coordinator's planned queries).
    let mut worker = sqlx::PgConnection::connect_with(&connect.clone().port(worker_port as u16))
        .await
        .unwrap();
    sqlx::query("SET ROLE statki_auditor")
        .execute(&mut worker)
        .await
        .unwrap();
    let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {matches_shard} WHERE id = $1"
    )))
    .bind(id)
    .fetch_one(&mut worker)
    .await
    .unwrap();
    assert_eq!(rows, 0, "the running match's row on its worker");
    worker.close().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP ROLE {operator}")))
        .execute(&pool)
        .await
        .unwrap();
}
