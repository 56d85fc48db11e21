//! Storage tests against a real database: the event log refuses tampering, settings are
//! initialised once, idempotency keys are claimed once, names are unique.

use chrono::Utc;
use sqlx::PgPool;
use statki::engine::{Clock, HouseOptions, Match, MatchRules, RuleSetId};
use statki::names::PlayerName;
use statki::store::{self, StoreError, events, idempotency, matches, players, settings};
use uuid::Uuid;

async fn one_match(pool: &PgPool) -> Uuid {
    match_created_by(pool, "Ala").await
}

async fn match_created_by(pool: &PgPool, name: &str) -> Uuid {
    let creator = Uuid::new_v4();
    players::insert(pool, creator, &PlayerName::parse(name).unwrap())
        .await
        .unwrap();
    let rules = MatchRules::new(
        RuleSetId::Statki,
        HouseOptions::default(),
        Clock {
            placement_seconds: 120,
            shot_seconds: 30,
        },
        900,
    )
    .unwrap();
    let created = Match::create(creator, rules, false, None, Utc::now()).unwrap();
    let state = Match::fold([&created]).unwrap();
    let id = Uuid::new_v4();
    matches::insert(
        &mut pool.acquire().await.unwrap(),
        id,
        &state,
        1,
        Utc::now(),
    )
    .await
    .unwrap();
    events::append(pool, id, 0, Utc::now(), &[created])
        .await
        .unwrap();
    id
}

#[sqlx::test]
async fn the_event_log_refuses_update_delete_and_truncate(pool: PgPool) {
    let id = one_match(&pool).await;
    for statement in [
        "UPDATE match_events SET kind = 'match_finished'",
        "DELETE FROM match_events",
        "TRUNCATE match_events CASCADE",
    ] {
        let error = sqlx::query(statement)
            .execute(&pool)
            .await
            .expect_err(statement);
        assert!(
            error.to_string().contains("append-only"),
            "{statement}: {error}"
        );
    }
    assert_eq!(events::list(&pool, id, 0, 10).await.unwrap().len(), 1);
}

#[sqlx::test]
async fn a_sequence_number_is_used_once_per_match(pool: PgPool) {
    let id = one_match(&pool).await;
    let again = events::append(
        &pool,
        id,
        0,
        Utc::now(),
        &[statki::engine::Event::MatchCancelled {
            reason: statki::engine::CancelReason::Withdrawn,
        }],
    )
    .await;
    assert!(
        matches!(again, Err(StoreError::Database(_))),
        "seq 1 was appended twice"
    );
}

#[sqlx::test]
async fn the_first_stored_setting_wins(pool: PgPool) {
    let first = settings::get_or_init(&pool, "jwt_secret", "one")
        .await
        .unwrap();
    let second = settings::get_or_init(&pool, "jwt_secret", "two")
        .await
        .unwrap();
    assert_eq!((first.as_str(), second.as_str()), ("one", "one"));
}

#[sqlx::test]
async fn an_idempotency_key_is_claimed_once_per_player(pool: PgPool) {
    let (ala, bolek) = (Uuid::new_v4(), Uuid::new_v4());
    assert!(idempotency::claim(&pool, ala, "k", "h1").await.unwrap());
    assert!(!idempotency::claim(&pool, ala, "k", "h2").await.unwrap());
    assert!(
        idempotency::claim(&pool, bolek, "k", "h1").await.unwrap(),
        "keys are per player"
    );
    idempotency::finish(&pool, ala, "k", &serde_json::json!({"ok": true}))
        .await
        .unwrap();
    let (hash, response) = idempotency::get(&pool, ala, "k").await.unwrap().unwrap();
    assert_eq!(hash, "h1");
    assert_eq!(response, Some(serde_json::json!({"ok": true})));
}

#[sqlx::test]
async fn names_are_unique_regardless_of_case(pool: PgPool) {
    let id = Uuid::new_v4();
    let inserted = players::insert(&pool, id, &PlayerName::parse("Kapitan").unwrap())
        .await
        .unwrap();
    assert_eq!((inserted.id, inserted.name.as_str()), (id, "Kapitan"));
    assert_eq!(players::get(&pool, id).await.unwrap(), Some(inserted));
    let taken = players::insert(
        &pool,
        Uuid::new_v4(),
        &PlayerName::parse("KAPITAN").unwrap(),
    )
    .await;
    assert!(matches!(taken, Err(StoreError::NameTaken)));
}

#[sqlx::test]
async fn a_match_row_round_trips_through_its_snapshot(pool: PgPool) {
    let id = one_match(&pool).await;
    let row = matches::get(&pool, id).await.unwrap().unwrap();
    assert_eq!(row.last_seq, 1, "the row counts the event stored with it");
    assert_eq!(row.state.phase, statki::engine::Phase::Waiting);
    assert!(store::ping(&pool).await.is_ok());
}

#[sqlx::test]
async fn an_unreadable_snapshot_spoils_its_own_row_only(pool: PgPool) {
    let broken = match_created_by(&pool, "Ala").await;
    let healthy = match_created_by(&pool, "Bolek").await;
    sqlx::query("UPDATE matches SET snapshot = '{\"broken\": true}' WHERE id = $1")
        .bind(broken)
        .execute(&pool)
        .await
        .unwrap();

    let alone = matches::get(&pool, broken).await;
    assert!(matches!(alone, Err(StoreError::Corrupt(_))), "{alone:?}");
    let named = store::listing::get(&pool, broken).await.map(|_| ());
    assert!(matches!(named, Err(StoreError::Corrupt(_))), "{named:?}");

    let kind = store::citus::Kind::of(&pool).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    let (locked, now) = matches::lock_many(&mut tx, kind, &[broken, healthy])
        .await
        .unwrap();
    assert!(now.is_some(), "the database's time comes with the rows");
    let outcomes: Vec<(Uuid, bool)> = locked
        .iter()
        .map(|locked| (locked.id, locked.row.is_ok()))
        .collect();
    let mut expected = vec![(broken, false), (healthy, true)];
    expected.sort();
    assert_eq!(
        outcomes, expected,
        "rows in id order, each judged on its own"
    );
}

/// Writes `state` with `events` over match `id` as decided on seq `after`, on its own
/// (outside any explicit transaction); returns the write's outcome and the match's events
/// and `last_seq` afterwards.
async fn conditional_write(
    pool: &PgPool,
    id: Uuid,
    state: &Match,
    events: &[statki::engine::Event],
    after: i64,
    unexpired_until: Option<chrono::DateTime<Utc>>,
) -> (Result<(), StoreError>, usize, i64) {
    let appends = [matches::Append {
        match_id: id,
        after,
        events,
    }];
    let rows = [matches::RowWrite {
        id,
        state,
        after,
        last_seq: after + 1,
        unexpired_until,
    }];
    // On plain PostgreSQL the write is one statement, atomic without a transaction; on
    // Citus it is a statement per shard, in a transaction rolled back when a row moved.
    let mut conn = pool.acquire().await.unwrap();
    let kind = statki::store::citus::Kind::of(&mut *conn).await.unwrap();
    if kind.distributed() {
        statki::store::begin(&mut conn).await.unwrap();
    }
    let written = matches::write(
        &mut conn,
        kind,
        Utc::now(),
        &matches::Write {
            appends: &appends,
            rows: &rows,
            answers: &[],
            releases: &[],
        },
    )
    .await
    .map(|_| ());
    if kind.distributed() {
        match written {
            Ok(()) => statki::store::commit(&mut conn, false).await.unwrap(),
            Err(_) => statki::store::rollback(&mut conn).await.unwrap(),
        }
    }
    drop(conn);
    let stored = events::list(pool, id, 0, 10).await.unwrap().len();
    let row = matches::get(pool, id).await.unwrap().unwrap();
    (written, stored, row.last_seq)
}

/// The write statement is a compare-and-set, atomic on its own: a row is written only
/// while it still ends at the sequence number its change was decided on and, when asked,
/// only while the database's clock is short of the deadline the decision relied on;
/// otherwise the statement fails with `Moved` and stores nothing at all.
#[sqlx::test]
async fn a_write_stores_nothing_over_a_row_that_moved_on_or_a_passed_deadline(pool: PgPool) {
    let id = one_match(&pool).await;
    let row = matches::get(&pool, id).await.unwrap().unwrap();
    let cancelled = [statki::engine::Event::MatchCancelled {
        reason: statki::engine::CancelReason::Withdrawn,
    }];
    let mut ended = row.state.clone();
    ended.evolve_all(&cancelled);
    let write = |after, unexpired_until| {
        conditional_write(&pool, id, &ended, &cancelled, after, unexpired_until)
    };
    // Decided on seq 0, but the row ends at 1: seq 1 is taken.
    let (written, stored, last_seq) = write(0, None).await;
    assert!(matches!(written, Err(StoreError::Moved)), "{written:?}");
    assert_eq!(
        (stored, last_seq),
        (1, 1),
        "nothing of the write was stored"
    );
    // Decided on the current row, relying on a deadline the database's clock has passed.
    let passed = Utc::now() - chrono::Duration::seconds(1);
    let (written, stored, last_seq) = write(1, Some(passed)).await;
    assert!(matches!(written, Err(StoreError::Moved)), "{written:?}");
    assert_eq!(
        (stored, last_seq),
        (1, 1),
        "nothing of the write was stored"
    );
    // Decided on the current row, with time left: written.
    let ahead = Utc::now() + chrono::Duration::seconds(30);
    let (written, stored, last_seq) = write(1, Some(ahead)).await;
    assert!(written.is_ok(), "{written:?}");
    assert_eq!((stored, last_seq), (2, 2));
}

#[sqlx::test]
async fn ladder_ranks_count_the_rated_players_above_on_every_page(pool: PgPool) {
    // Ratings 1700, 1600, 1600, 1500 … on `classic`, one unrated player with the highest
    // rating (no games: not on the ladder), and a `statki` standing that must not count.
    let ratings = [1700.0, 1600.0, 1600.0, 1500.0, 1400.0, 1300.0];
    let mut ids = Vec::new();
    for (index, rating) in ratings.iter().enumerate() {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO players (id, name, name_key) VALUES (gen_random_uuid(), $1, $1)
             RETURNING id",
        )
        .bind(format!("rated{index}"))
        .fetch_one(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO ratings (ruleset, player_id, rating, deviation, volatility, games, wins,
                                  losses, draws, updated_at, name)
             SELECT ruleset, $1, rating, 100, 0.06, 1, 1, 0, 0, now(), $3
             FROM (VALUES ('classic', $2::float8), ('statki', 3000 - $2::float8)) AS r(ruleset, rating)",
        )
        .bind(id)
        .bind(rating)
        .bind(format!("rated{index}"))
        .execute(&pool)
        .await
        .unwrap();
        ids.push(id);
    }
    let unrated: Uuid = sqlx::query_scalar(
        "INSERT INTO players (id, name, name_key) VALUES (gen_random_uuid(), 'unrated', 'unrated')
         RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO ratings VALUES ('classic', $1, 2000, 350, 0.06, 0, 0, 0, 0, now(), 'unrated')",
    )
    .bind(unrated)
    .execute(&pool)
    .await
    .unwrap();
    // Rows written here, not through `ratings::record`: the bucket counts from them.
    store::ratings::recount_buckets(&mut pool.acquire().await.unwrap())
        .await
        .unwrap();

    let mut ranks = Vec::new();
    let mut after = None;
    loop {
        let page = store::ratings::page(&pool, "classic", after, 2)
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        let last = page.last().unwrap();
        after = Some((last.standing.rating.rating, last.standing.player_id));
        ranks.extend(
            page.iter()
                .map(|row| (row.standing.rating.rating, row.rank)),
        );
    }
    assert_eq!(
        ranks,
        [
            (1700.0, 1),
            (1600.0, 2),
            (1600.0, 2),
            (1500.0, 4),
            (1400.0, 5),
            (1300.0, 6)
        ]
    );
    let own = store::ratings::for_player(&pool, ids[3]).await.unwrap();
    let mut own: Vec<(String, i64)> = own
        .into_iter()
        .map(|row| (row.standing.ruleset.clone(), row.rank))
        .collect();
    own.sort();
    assert_eq!(own, [("classic".to_owned(), 4), ("statki".to_owned(), 3)]);
}

#[sqlx::test]
async fn online_means_a_live_stream_lease_or_a_bot(pool: PgPool) {
    let lifetime = std::time::Duration::from_secs(60);
    let (ala, bolek) = (Uuid::new_v4(), Uuid::new_v4());
    for (id, name) in [(ala, "Ala"), (bolek, "Bolek")] {
        players::insert(&pool, id, &PlayerName::parse(name).unwrap())
            .await
            .unwrap();
    }
    let bot: Uuid = "00000000-0000-4000-8000-00000000b001".parse().unwrap();
    let everyone = [ala, bolek, bot];
    assert_eq!(
        store::streams::online(&pool, &everyone, lifetime)
            .await
            .unwrap(),
        vec![bot],
        "nobody streams: only the bot is online"
    );
    let lease = Uuid::now_v7();
    assert!(
        store::streams::lease(&pool, lease, ala, Uuid::now_v7(), 8, lifetime)
            .await
            .unwrap()
    );
    let mut online = store::streams::online(&pool, &everyone, lifetime)
        .await
        .unwrap();
    online.sort_unstable();
    let mut expected = vec![ala, bot];
    expected.sort_unstable();
    assert_eq!(online, expected);
    // A lease not renewed within its lifetime (its replica died) no longer counts.
    sqlx::query("UPDATE stream_leases SET renewed_at = now() - interval '2 minutes'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        store::streams::online(&pool, &[ala], lifetime)
            .await
            .unwrap(),
        Vec::<Uuid>::new()
    );
    sqlx::query("UPDATE stream_leases SET renewed_at = now()")
        .execute(&pool)
        .await
        .unwrap();
    store::streams::release(&pool, lease).await.unwrap();
    assert!(
        store::streams::online(&pool, &[ala], lifetime)
            .await
            .unwrap()
            .is_empty()
    );
}

#[sqlx::test]
async fn a_players_deep_page_is_one_descent_of_their_index(pool: PgPool) {
    statki::store::migrate(&pool).await.unwrap();
    // 3,000 matches of one player among 30,000 rows of others.
    sqlx::query(
        "INSERT INTO player_matches (player_id, match_id, role, opponent, ruleset, ranked,
                                     status, result, created_at, ended_at)
         SELECT CASE WHEN n % 10 = 0 THEN '00000000-0000-4000-8000-000000000001'::uuid
                     ELSE gen_random_uuid() END,
                gen_random_uuid(), 'creator', NULL, 'statki', false, 'finished', 'draw',
                now() - n * interval '1 minute', now()
         FROM generate_series(1, 30000) AS n",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE player_matches")
        .execute(&pool)
        .await
        .unwrap();
    let player: Uuid = "00000000-0000-4000-8000-000000000001".parse().unwrap();
    // Page 50 of 20: the cursor of the 980th match.
    let deep: (chrono::DateTime<Utc>, Uuid) = sqlx::query_as(
        "SELECT created_at, match_id FROM player_matches WHERE player_id = $1
         ORDER BY created_at DESC, match_id DESC OFFSET 979 LIMIT 1",
    )
    .bind(player)
    .fetch_one(&pool)
    .await
    .unwrap();
    let cursor = statki::store::listing::Cursor {
        created_at: deep.0,
        id: deep.1,
    };
    let page = statki::store::player_matches::page(&pool, player, Some(cursor), 21)
        .await
        .unwrap();
    assert_eq!(page.len(), 21);
    assert!(
        !page.contains(&deep.1),
        "the cursor's own match is on the page before"
    );
    let sql = "SELECT match_id FROM player_matches
         WHERE player_id = $1 AND role <> 'invited'
           AND ($2::timestamptz IS NULL OR (created_at, match_id) < ($2, $3))
         ORDER BY created_at DESC, match_id DESC LIMIT $4";
    let mut conn = pool.acquire().await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("PREPARE deep_page AS {sql}")))
        .execute(&mut *conn)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, COSTS OFF) EXECUTE deep_page('{player}', '{}', '{}', 21)",
        deep.0.to_rfc3339(),
        deep.1
    )))
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("player_matches_page_idx"), "{plan}");
    assert!(
        !plan.contains("Sort"),
        "a sort instead of a descent: {plan}"
    );
    // The descent starts at the cursor: it reads the page, not the 980 rows before it.
    let read: Vec<u64> = plan
        .lines()
        .filter(|line| line.contains("Index") && line.contains("rows="))
        .filter_map(|line| line.split("rows=").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        !read.is_empty() && read.iter().all(|&rows| rows <= 21),
        "rows read per index scan: {read:?}\n{plan}"
    );
}
