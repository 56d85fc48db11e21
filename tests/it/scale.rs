//! Cost that does not grow with the work: every periodic query, run with
//! `EXPLAIN (ANALYZE, BUFFERS)` over 100,000 matches in play, touches a small constant of
//! buffers; a rank costs the same on a ladder ten times longer; and concurrent commands at
//! a few matches, across lanes and two replicas sharing the database, never deadlock.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::common::{Player, spawn_app};

/// Matches in play for the cost test.
const IN_PLAY: i64 = 100_000;
/// The most shared buffers (hit or read) any one poll may touch at that size. An index
/// descent and a handful of rows (measured: 2 to 50); a scan of the matches in play would
/// touch thousands.
const BUFFER_BOUND: i64 = 100;
/// The most shared buffers a profile's own ranks may touch on a ladder of 50,000 rated
/// players (measured: 12; counting the players above the lowest touched 618).
const RANK_BUFFER_BOUND: i64 = 30;
/// The most shared buffers a ladder page of 51 may touch on a vacuumed ladder of 50,000: a
/// few index pages for its rows and the counts that rank its first row (measured: 12; each
/// row fetched from `ratings` and its name from `players`, 267 on a ladder of 100,000).
const PAGE_BUFFER_BOUND: i64 = 30;

/// Fills the database quickly: players, `IN_PLAY` matches in battle with clocks running
/// later, a tenth of them against a bot whose pause has not run yet, a few bot turns due,
/// and fresh idempotency keys, stream leases and rematch offers, none of them due.
///
/// The fill runs with triggers off (foreign-key checks and the phase-count trigger, whose
/// count it writes itself), as a bulk load would.
async fn fill(pool: &PgPool) -> DateTime<Utc> {
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    let now = fill_on(&mut conn).await;
    sqlx::query("RESET session_replication_role")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("ANALYZE").execute(&mut *conn).await.unwrap();
    now
}

async fn fill_on(pool: &mut sqlx::PgConnection) -> DateTime<Utc> {
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&mut *pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO players (id, name, name_key)
         SELECT gen_random_uuid(), 'p' || g, 'p' || g FROM generate_series(1, 2000) AS g",
    )
    .execute(&mut *pool)
    .await
    .unwrap();

    sqlx::query(
        "WITH people AS (SELECT array_agg(id ORDER BY id) AS ids FROM players
                         WHERE bot_level IS NULL)
         INSERT INTO matches (id, ruleset, ranked, phase, creator, joiner, turn, deadline,
                              wake_at, last_seq, snapshot, created_at, updated_at)
         SELECT gen_random_uuid(), 'classic', false, 'battle', ids[1 + g % 1000],
                CASE WHEN g % 10 = 0 THEN '00000000-0000-4000-8000-00000000b002'::uuid
                     ELSE ids[1001 + g % 1000] END,
                ids[1 + g % 1000], $1 + interval '1 hour' + g * interval '1 ms',
                $1 + interval '1 hour' + g * interval '1 ms', 10, '{}'::jsonb, $1, $1
         FROM generate_series(1, $2) AS g, people",
    )
    .bind(now)
    .bind(IN_PLAY)
    .execute(&mut *pool)
    .await
    .unwrap();

    // Bot matches: the bot's turn, its pause still running (the human just shot)...
    sqlx::query(
        "INSERT INTO bot_turns (match_id, bot, setup, since, deadline)
         SELECT id, joiner, false, $1, deadline FROM matches
         WHERE joiner = '00000000-0000-4000-8000-00000000b002'",
    )
    .bind(now)
    .execute(&mut *pool)
    .await
    .unwrap();

    // ...but for five, which are due.
    sqlx::query(
        "UPDATE bot_turns SET since = $1 - interval '1 minute'
         WHERE match_id IN (SELECT match_id FROM bot_turns ORDER BY match_id LIMIT 5)",
    )
    .bind(now)
    .execute(&mut *pool)
    .await
    .unwrap();

    sqlx::query(
        "INSERT INTO idempotency_keys (player_id, key, request_hash, created_at)
         SELECT creator, 'k' || row_number() OVER (), 'h', $1 FROM matches",
    )
    .bind(now)
    .execute(&mut *pool)
    .await
    .unwrap();

    sqlx::query(
        "INSERT INTO stream_leases (id, player_id, replica_id, renewed_at)
         SELECT gen_random_uuid(), creator, gen_random_uuid(), $1 + interval '1 hour'
         FROM matches LIMIT 20000",
    )
    .bind(now)
    .execute(&mut *pool)
    .await
    .unwrap();

    // Offers to people and to the bot (a tenth of the matches), all just made...
    sqlx::query(
        "INSERT INTO rematch_offers (match_id, player_id, offered_at, expires_at, bot)
         SELECT id, creator, $1, $1 + interval '5 minutes',
                CASE WHEN joiner = '00000000-0000-4000-8000-00000000b002'::uuid THEN joiner END
         FROM matches ORDER BY id LIMIT 20000",
    )
    .bind(now)
    .execute(&mut *pool)
    .await
    .unwrap();

    // ...but for three to the bot, whose pause has run.
    sqlx::query(
        "UPDATE rematch_offers SET offered_at = $1 - interval '1 minute'
         WHERE match_id IN (SELECT match_id FROM rematch_offers WHERE bot IS NOT NULL
                            ORDER BY match_id LIMIT 3)",
    )
    .bind(now)
    .execute(&mut *pool)
    .await
    .unwrap();

    sqlx::query("INSERT INTO match_phase_counts (phase, n) VALUES ('battle', $1)")
        .bind(IN_PLAY)
        .execute(&mut *pool)
        .await
        .unwrap();
    now
}

/// Shared buffers (hit + read) the whole plan touched.
fn buffers(plan: &Value) -> i64 {
    let top = &plan[0]["Plan"];
    top["Shared Hit Blocks"].as_i64().unwrap() + top["Shared Read Blocks"].as_i64().unwrap()
}

macro_rules! explained {
    ($pool:expr, $name:expr, $sql:expr $(, $bind:expr)*) => {{
        let text = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}", $sql);
        let plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(text))
            $(.bind($bind))*
            .fetch_one($pool)
            .await
            .unwrap();
        let used = buffers(&plan);
        println!("{:<28} {used:>5} buffers", $name);
        ($name, used, plan)
    }};
}

#[sqlx::test]
async fn every_periodic_query_costs_what_is_due_not_what_is_in_play(pool: PgPool) {
    statki::store::migrate(&pool).await.unwrap();
    let started = std::time::Instant::now();
    let now = fill(&pool).await;
    println!("filled in {:?}", started.elapsed());
    let mut results = Vec::new();

    // The bot worker's claim: the five due turns, not the 10,000 waiting or the 100,000 in
    // play.
    let claim = explained!(
        &pool,
        "bot claim",
        statki::store::bots::CLAIM_TURNS,
        now - Duration::milliseconds(700),
        now - Duration::milliseconds(500),
        now + Duration::seconds(1),
        16_i64
    );
    assert_eq!(
        claim.2[0]["Plan"]["Actual Rows"].as_i64(),
        Some(5),
        "the due bot turns are claimed"
    );
    results.push(claim);
    results.push(explained!(
        &pool,
        "clock claim",
        statki::store::matches::CLAIM_DUE,
        now,
        32_i64
    ));
    results.push(explained!(
        &pool,
        "clock plan and heartbeat",
        statki::store::replicas::BEAT_AND_PLAN,
        uuid::Uuid::now_v7(),
        2000.0_f64
    ));
    let offers = explained!(
        &pool,
        "bot rematch offers",
        statki::store::bots::REMATCH_OFFERS,
        now,
        now - Duration::milliseconds(500),
        16_i64
    );
    assert_eq!(
        offers.2[0]["Plan"]["Actual Rows"].as_i64(),
        Some(3),
        "the due offers to bots are found"
    );
    results.push(offers);
    results.push(explained!(
        &pool,
        "rematch offer expiry",
        statki::store::rematch::PURGE_OFFERS,
        now
    ));
    results.push(explained!(
        &pool,
        "stream lease purge",
        statki::store::streams::PURGE_LEASES,
        chrono::TimeDelta::seconds(30)
    ));
    results.push(explained!(
        &pool,
        "notice purge",
        statki::store::notices::PURGE_NOTICES,
        now - statki::housekeeping::NOTICE_RETENTION,
        5000_i64
    ));
    results.push(explained!(
        &pool,
        "idempotency key purge",
        statki::store::idempotency::PURGE_KEYS,
        now - statki::store::idempotency::KEY_LIFETIME,
        5000_i64
    ));
    // The gauges: fold the deltas the inserts left (once, like the first refresh), then a
    // handful of phase changes costs a handful of buffers to fold and read.
    sqlx::query(statki::store::matches::FOLD_PHASE_COUNTS)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("VACUUM match_phase_deltas")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE matches SET phase = 'finished'
         WHERE id IN (SELECT id FROM matches ORDER BY id LIMIT 10)",
    )
    .execute(&pool)
    .await
    .unwrap();
    results.push(explained!(
        &pool,
        "gauge fold",
        statki::store::matches::FOLD_PHASE_COUNTS
    ));
    results.push(explained!(
        &pool,
        "gauge read",
        statki::store::matches::PHASE_COUNTS
    ));
    let counts: Vec<(String, i64)> = sqlx::query_as(statki::store::matches::PHASE_COUNTS)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(
        counts.contains(&("battle".into(), IN_PLAY - 10)),
        "{counts:?}"
    );
    assert!(counts.contains(&("finished".into(), 10)), "{counts:?}");

    for (name, used, plan) in &results {
        assert!(
            *used <= BUFFER_BOUND,
            "{name} touched {used} buffers at {IN_PLAY} matches in play: {plan:#}"
        );
    }
}

/// Sends `moves` placement moves (ship 0 back and forth, every one accepted) from both
/// seats of each match, all at once, through the replicas in turn: several commands of one
/// match are in flight together, in every lane of both replicas.
async fn storm(
    apps: &[crate::common::TestApp],
    games: &[(String, Player, Player)],
    moves: usize,
) -> Vec<u16> {
    let mut tasks = Vec::new();
    for n in 0..moves {
        for (m, (id, a, b)) in games.iter().enumerate() {
            let app = &apps[(m + n) % apps.len()];
            let seat = if (n + m) % 2 == 0 { a } else { b };
            let cell = ["A1", "A3", "A5", "A7"][n % 4];
            let client = app.client.clone();
            let url = app.url(&format!("/v1/matches/{id}/ships/0"));
            let token = seat.token.clone();
            tasks.push(tokio::spawn(async move {
                client
                    .put(url)
                    .bearer_auth(token)
                    .json(&json!({ "cell": cell, "orientation": "horizontal" }))
                    .send()
                    .await
                    .map(|reply| reply.status().as_u16())
            }));
        }
    }
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap().unwrap());
    }
    statuses
}

async fn deadlocks(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn commands_at_a_few_matches_across_lanes_and_replicas_never_deadlock(pool: PgPool) {
    // The replicas get their own connections, closed at the end so every backend's
    // statistics are flushed before the count is read.
    let replica_pool = PgPoolOptions::new()
        .max_connections(40)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .unwrap();
    let first = spawn_app(replica_pool.clone()).await;
    let second = spawn_app(replica_pool.clone()).await;
    let mut games = Vec::new();
    for _ in 0..12 {
        games.push(first.placement_match("classic").await);
    }
    let before = deadlocks(&pool).await;
    let apps = [first, second];
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.extend(storm(&apps, &games, 40).await);
    }
    replica_pool.close().await;
    drop(apps);
    // Statistics reach the shared counters when the backends exit; give them a moment.
    let mut after = deadlocks(&pool).await;
    for _ in 0..20 {
        sqlx::query("SELECT pg_stat_clear_snapshot()")
            .execute(&pool)
            .await
            .unwrap();
        after = deadlocks(&pool).await;
        if after != before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(after, before, "deadlocks were detected");
    let refused: Vec<&u16> = statuses.iter().filter(|&&status| status != 200).collect();
    assert!(refused.is_empty(), "moves were answered {refused:?}");
}

#[sqlx::test]
async fn housekeeping_applies_every_retention_policy_and_keeps_the_event_log(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (match_id, _, _) = app.placement_match("classic").await;
    let events_before = app.event_count().await;
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&pool)
        .await
        .unwrap();
    let (ala, bolek) = (app.register("Ala").await, app.register("Bolek").await);
    let ala_id: uuid::Uuid = ala.id.parse().unwrap();
    let bolek_id: uuid::Uuid = bolek.id.parse().unwrap();
    // Ala: three notices past the retention and a recent one; Bolek: one old notice, his
    // latest.
    for (player, seq, age_days) in [
        (ala_id, 1, 40),
        (ala_id, 2, 35),
        (ala_id, 3, 31),
        (ala_id, 4, 1),
        (bolek_id, 1, 40),
    ] {
        sqlx::query(
            "INSERT INTO player_notices (player_id, seq, at, kind, payload)
             VALUES ($1, $2, $3 - $4 * interval '1 day', 'challenge', '{}')",
        )
        .bind(player)
        .bind(seq)
        .bind(now)
        .bind(age_days as f64)
        .execute(&pool)
        .await
        .unwrap();
    }
    for (key, age_hours) in [("old", 25), ("fresh", 1)] {
        sqlx::query(
            "INSERT INTO idempotency_keys (player_id, key, request_hash, created_at)
             VALUES ($1, $2, 'h', $3 - $4 * interval '1 hour')",
        )
        .bind(ala_id)
        .bind(key)
        .bind(now)
        .bind(age_hours as f64)
        .execute(&pool)
        .await
        .unwrap();
    }
    for age_days in [8.0, 0.0] {
        sqlx::query(
            "INSERT INTO replicas (id, started_at, last_seen)
             VALUES (gen_random_uuid(), $1 - interval '9 days', $1 - $2 * interval '1 day')",
        )
        .bind(now)
        .bind(age_days)
        .execute(&pool)
        .await
        .unwrap();
    }

    let purged = statki::housekeeping::purge(&pool, now).await.unwrap();
    assert_eq!(
        purged,
        statki::housekeeping::Purged {
            keys: 1,
            notices: 3,
            heartbeats: 1,
        }
    );
    let notices: Vec<(uuid::Uuid, i64)> = sqlx::query_as(
        "SELECT player_id, seq FROM player_notices WHERE player_id = ANY($1)
         ORDER BY player_id, seq",
    )
    .bind(vec![ala_id, bolek_id])
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut expected = vec![(ala_id, 4), (bolek_id, 1)];
    expected.sort();
    assert_eq!(notices, expected, "each player's latest notice is kept");
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT key FROM idempotency_keys WHERE player_id = $1")
            .bind(ala_id)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(keys, vec!["fresh".to_owned()]);
    assert_eq!(
        app.event_count().await,
        events_before,
        "the event log stays"
    );
    assert!(events_before > 0, "{match_id} has events");
    // Nothing more is due: a second purge deletes nothing.
    let again = statki::housekeeping::purge(&pool, now).await.unwrap();
    assert_eq!(again, statki::housekeeping::Purged::default());
}

/// Adds `count` players rated on `classic` around 1500 (a spread like Glicko's: most within
/// a few hundred points), counts the ladder's buckets afresh and vacuums, as a ladder long
/// in use would be.
async fn rate_players(pool: &PgPool, count: i64) {
    sqlx::query(
        "WITH new AS (
             INSERT INTO players (id, name, name_key)
             SELECT gen_random_uuid(), 'l' || g, 'l' || g
             FROM generate_series((SELECT count(*) FROM players) + 1,
                                  (SELECT count(*) FROM players) + $1) AS g
             RETURNING id, name)
         INSERT INTO ratings (ruleset, player_id, name, rating, deviation, volatility, games,
                              wins, losses, draws, updated_at)
         SELECT 'classic', id, name, 1500 + 400 * (random() + random() + random() + random() - 2),
                80, 0.06, 10, 5, 5, 0, now()
         FROM new",
    )
    .bind(count)
    .execute(pool)
    .await
    .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    statki::store::ratings::recount_buckets(&mut conn)
        .await
        .unwrap();
    sqlx::query("VACUUM (ANALYZE) ratings, rating_buckets, players")
        .execute(&mut *conn)
        .await
        .unwrap();
}

/// The ladder's worst ranks to count: the lowest-rated player's own ranks, and the page
/// after the player a tenth of the way up from the bottom, beside the first page. With the
/// counting before migration 0057 (one plus the players above, down `ratings_rank_idx`)
/// for comparison.
async fn rank_costs(pool: &PgPool) -> [i64; 4] {
    let (lowest, rating): (uuid::Uuid, f64) = sqlx::query_as(
        "SELECT player_id, rating FROM ratings WHERE ruleset = 'classic'
         ORDER BY rating, player_id LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let (cursor, cursor_rating): (uuid::Uuid, f64) = sqlx::query_as(
        "SELECT player_id, rating FROM ratings WHERE ruleset = 'classic'
         ORDER BY rating, player_id OFFSET (SELECT count(*) / 10 FROM ratings) LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let own = explained!(
        pool,
        "own ranks, lowest",
        statki::store::ratings::OWN_RANKS,
        lowest
    );
    let first = explained!(
        pool,
        "ladder, first page",
        statki::store::ratings::LADDER_PAGE,
        "classic",
        None::<f64>,
        None::<uuid::Uuid>,
        51_i64
    );
    let end = explained!(
        pool,
        "ladder page near the end",
        statki::store::ratings::LADDER_PAGE,
        "classic",
        Some(cursor_rating),
        Some(cursor),
        51_i64
    );
    for page in [&first, &end] {
        assert_eq!(page.2[0]["Plan"]["Actual Rows"].as_i64(), Some(51));
    }
    let counted = explained!(
        pool,
        "counted above, lowest",
        "SELECT 1 + count(*) FROM ratings
         WHERE ruleset = 'classic' AND games > 0 AND rating > $1",
        rating
    );
    [own.1, first.1, end.1, counted.1]
}

#[sqlx::test]
async fn a_rank_costs_the_same_on_a_ladder_ten_times_longer(pool: PgPool) {
    statki::store::migrate(&pool).await.unwrap();
    rate_players(&pool, 5_000).await;
    let [own_small, first_small, end_small, counted_small] = rank_costs(&pool).await;
    rate_players(&pool, 45_000).await;
    let [own_large, first_large, end_large, counted_large] = rank_costs(&pool).await;
    println!(
        "5,000 → 50,000 rated players: own ranks {own_small} → {own_large} buffers; the first \
         page {first_small} → {first_large}, a page near the end {end_small} → {end_large}; \
         counting the players above the lowest {counted_small} → {counted_large}"
    );
    // Own ranks: an index descent or two, the bucket rows above (a few pages) and one
    // bucket's index entries, where counting the players above read every entry above.
    assert!(
        own_large <= RANK_BUFFER_BOUND,
        "own ranks: {own_large} buffers on a ladder of 50,000"
    );
    assert!(
        own_large <= own_small + 8,
        "own ranks: {own_small} buffers at 5,000 players grew to {own_large} at 50,000"
    );
    // A page: its 51 rows, read together from the leaf pages of `ratings_page_idx` (one
    // level deeper on the longer ladder), and one rank, wherever it starts. Joined row by
    // row to the standings' heap and the players' names, it took four buffers a row.
    for (first, end) in [(first_small, end_small), (first_large, end_large)] {
        assert!(
            end <= first + 8,
            "a page near the end touched {end} buffers, the first page {first}"
        );
    }
    assert!(
        first_large <= PAGE_BUFFER_BOUND && first_large <= first_small + 4,
        "the first page: {first_small} buffers at 5,000 players, {first_large} at 50,000"
    );
}

#[sqlx::test]
async fn a_ladder_page_keeps_one_plan_on_a_long_ladder(pool: PgPool) {
    statki::store::migrate(&pool).await.unwrap();
    rate_players(&pool, 100_000).await;
    // One connection, so every call meets the same prepared statement, as a pooled
    // connection of the service does. PostgreSQL plans the first five calls for their
    // values, then keeps the generic plan unless it costs more than those: with the
    // page's limit bound, it did on this ladder of 100,000 (and on the scale bench's).
    let mut conn = pool.acquire().await.unwrap();
    for _ in 0..10 {
        let page = statki::store::ratings::page(&mut *conn, "classic", None, 51)
            .await
            .unwrap();
        assert_eq!(page.len(), 51);
    }
    let (generic, custom): (i64, i64) = sqlx::query_as(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
    )
    .bind(statki::store::ratings::LADDER_PAGE)
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    println!("ten ladder pages: {generic} generic plans, {custom} planned for their values");
    assert_eq!(
        (generic, custom),
        (5, 5),
        "a page planned afresh on every call costs more to plan than to run"
    );
}

#[sqlx::test]
async fn a_players_record_is_one_row_whatever_their_history(pool: PgPool) {
    statki::store::migrate(&pool).await.unwrap();
    // A regular with 10,000 finished matches, their rows spread among ten other players'.
    let regular: uuid::Uuid = "00000000-0000-4000-8000-000000000001".parse().unwrap();
    sqlx::query(
        "INSERT INTO player_matches (player_id, match_id, role, opponent, ruleset, ranked,
                                     status, result, created_at, ended_at)
         SELECT CASE WHEN g % 11 = 0 THEN $1 ELSE gen_random_uuid() END,
                gen_random_uuid(), 'creator', gen_random_uuid(), 'classic', true, 'finished',
                (ARRAY['win', 'loss', 'draw'])[1 + g % 3], now(), now()
         FROM generate_series(1, 110000) AS g",
    )
    .bind(regular)
    .execute(&pool)
    .await
    .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    statki::store::player_matches::recount_records(&mut conn)
        .await
        .unwrap();
    sqlx::query("VACUUM (ANALYZE) player_records")
        .execute(&mut *conn)
        .await
        .unwrap();
    let (_, used, plan) = explained!(
        &pool,
        "a player's record",
        statki::store::player_matches::RECORD,
        regular
    );
    // One descent of the primary key of 100,000 records and one row: counting the
    // regular's 10,000 results read 74 index pages, and visiting their rows hundreds.
    assert!(used <= 6, "{used} buffers for one record: {plan:#}");
    let record = statki::store::player_matches::record(&pool, regular)
        .await
        .unwrap();
    assert_eq!(record.0 + record.1 + record.2, 10_000);
    assert!(
        statki::store::player_matches::record_mismatches(&pool)
            .await
            .unwrap()
            .is_empty()
    );
}
