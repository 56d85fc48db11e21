//! Bot players and the work waiting for them: matches where a bot must join, place or
//! shoot (the `bot_turns` queue, written by the write path in the statement that writes
//! the match row, so pending bot work is as durable as the match), and rematch offers it
//! must answer.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;
use super::matches::{MatchRecord, MatchRow};
use crate::bot::Level;

/// A bot as `GET /v1/bots` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotRow {
    pub id: Uuid,
    pub name: String,
    pub level: Level,
    pub description: String,
}

fn level(text: &str) -> Result<Level, StoreError> {
    Level::parse(text).ok_or_else(|| StoreError::Corrupt(format!("bot level {text}")))
}

/// A bot's `players` row as selected.
#[derive(sqlx::FromRow)]
struct BotRecord {
    id: Uuid,
    name: String,
    bot_level: String,
    bot_description: String,
}

impl TryFrom<BotRecord> for BotRow {
    type Error = StoreError;

    fn try_from(bot: BotRecord) -> Result<Self, StoreError> {
        Ok(BotRow {
            id: bot.id,
            name: bot.name,
            level: level(&bot.bot_level)?,
            description: bot.bot_description,
        })
    }
}

/// Every bot, easiest first.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<BotRow>, StoreError> {
    let rows = sqlx::query_as::<_, BotRecord>(
        "SELECT id, name, bot_level, bot_description FROM players
         WHERE bot_level IS NOT NULL
         ORDER BY array_position(ARRAY['easy', 'medium', 'hard'], bot_level), name",
    )
    .fetch_all(db)
    .await?;
    rows.into_iter().map(BotRow::try_from).collect()
}

/// The level of `player` when it is a bot.
pub async fn level_of(db: impl PgExecutor<'_>, player: Uuid) -> Result<Option<Level>, StoreError> {
    let text: Option<Option<String>> =
        sqlx::query_scalar("SELECT bot_level FROM players WHERE id = $1")
            .bind(player)
            .fetch_optional(db)
            .await?;
    text.flatten().as_deref().map(level).transpose()
}

/// A match locked for a bot's next action.
#[derive(Debug)]
pub struct BotTurn {
    pub id: Uuid,
    pub bot: Uuid,
    pub level: Result<Level, StoreError>,
    pub row: Result<MatchRow, StoreError>,
}

/// A match row claimed for a bot, with the bot and its level as stored.
#[derive(sqlx::FromRow)]
pub(super) struct TurnRecord {
    #[sqlx(flatten)]
    record: MatchRecord,
    bot: Uuid,
    bot_level: String,
}

impl From<TurnRecord> for BotTurn {
    fn from(turn: TurnRecord) -> Self {
        BotTurn {
            id: turn.record.id,
            bot: turn.bot,
            level: level(&turn.bot_level),
            row: turn.record.try_into(),
        }
    }
}

/// The bot worker's claim (see [`claim_turns`]): the due rows of `bot_turns` (kept by the
/// write path), through its indexes, then their matches.
pub const CLAIM_TURNS: &str = "WITH settled AS (
         SELECT match_id, bot, since FROM bot_turns
         WHERE since <= $2 AND (setup OR since <= $1)
         ORDER BY since LIMIT $4 FOR UPDATE SKIP LOCKED
     ), urgent AS (
         SELECT match_id, bot, since FROM bot_turns
         WHERE deadline <= $3
         ORDER BY deadline LIMIT $4 FOR UPDATE SKIP LOCKED
     ), due AS (
         SELECT match_id, bot, since FROM settled
         UNION SELECT match_id, bot, since FROM urgent
     )
     SELECT m.id, m.snapshot, m.last_seq, m.created_at, d.bot, p.bot_level
     FROM due d
     JOIN matches m ON m.id = d.match_id
     -- A lookup by id for each due turn, whatever the statistics say of `players` (a join
     -- planned on stale ones read every player at each poll).
     CROSS JOIN LATERAL (SELECT bot_level FROM players
                         WHERE id = d.bot AND bot_level IS NOT NULL LIMIT 1) p
     ORDER BY d.since, m.id
     LIMIT $4
     FOR UPDATE OF m SKIP LOCKED";

/// Locks, for this transaction, up to `limit` matches where a bot has something to do:
/// join a match it is invited to, place its fleet, or shoot on its turn. A match qualifies
/// once it has been still since `settled` for a shot or `setup_settled` for joining and
/// placing (the bot's pauses), or at once when its clock runs out before `urgent`, so a bot
/// never loses on time for pausing. Only due rows of the `bot_turns` queue are read, so a
/// poll costs what is due, not what is in play. Rows another transaction holds are skipped
/// (`SKIP LOCKED`, on the queue and on the match): replicas share the work, none acts on a
/// match twice, and the claim never waits for anyone.
///
/// On Citus a multi-shard `FOR UPDATE` is not supported: [`super::citus::claim_turns`]
/// finds the due turns with a read of every shard and claims each match on its own.
pub async fn claim_turns(
    conn: &mut sqlx::PgConnection,
    kind: super::citus::Kind,
    settled: DateTime<Utc>,
    setup_settled: DateTime<Utc>,
    urgent: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<BotTurn>, StoreError> {
    if kind.distributed() {
        let rows = super::citus::claim_turns(conn, settled, setup_settled, urgent, limit).await?;
        return Ok(rows.into_iter().map(BotTurn::from).collect());
    }
    let rows = sqlx::query_as::<_, TurnRecord>(CLAIM_TURNS)
        .bind(settled)
        .bind(setup_settled)
        .bind(urgent)
        .bind(limit)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(BotTurn::from).collect())
}

/// A rematch offer a bot must answer: the finished match and the bot.
#[derive(sqlx::FromRow)]
struct OfferRecord {
    match_id: Uuid,
    bot: Uuid,
}

/// The bot worker's query for rematch offers (see [`rematch_offers`]): only offers made to
/// a bot, through their partial index.
pub const REMATCH_OFFERS: &str = "SELECT o.match_id, o.bot
     FROM rematch_offers o
     WHERE o.bot IS NOT NULL AND o.offered_at <= $2 AND o.expires_at > $1
       AND NOT EXISTS (SELECT 1 FROM rematches r WHERE r.match_id = o.match_id)
     ORDER BY o.offered_at
     LIMIT $3";

/// Finished matches against a bot whose human opponent offers a rematch (made before
/// `settled`) that the bot has not answered yet, with the bot to answer. Reads only offers
/// made to bots, so a poll costs what is due, not every live offer.
pub async fn rematch_offers(
    db: impl PgExecutor<'_>,
    now: DateTime<Utc>,
    settled: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
    let rows = sqlx::query_as::<_, OfferRecord>(REMATCH_OFFERS)
        .bind(now)
        .bind(settled)
        .bind(limit)
        .fetch_all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|offer| (offer.match_id, offer.bot))
        .collect())
}
