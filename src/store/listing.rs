//! Reads of matches for display: one match or a page of a list (open, live, a player's),
//! each with the names of the players it names, joined in the same query.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::StoreError;
use super::matches::{MatchRecord, MatchRow};

/// A match row with the names of its creator, joiner and invited player, by id.
pub struct NamedRow {
    pub row: MatchRow,
    pub names: BTreeMap<Uuid, String>,
}

/// A listed match: its row, the names it names, and the ladder ratings of its players on
/// its rule set's ladder (those who have one).
pub struct ListedRow {
    pub named: NamedRow,
    pub ratings: BTreeMap<Uuid, f64>,
}

/// Which matches a list holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// Waiting for an opponent, and joinable by `viewer` (not a challenge to someone else).
    Open { viewer: Uuid },
    /// Being played: placement or battle.
    Live,
    /// Every match `player` has a seat in.
    PlayerOf { player: Uuid },
}

/// Where a page starts: strictly after this match in newest-first order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

/// A `matches` row as listed, with the names it carries as one JSON object.
#[derive(sqlx::FromRow)]
struct NamedRecord {
    #[sqlx(flatten)]
    record: MatchRecord,
    names: Json<BTreeMap<Uuid, String>>,
}

impl TryFrom<NamedRecord> for NamedRow {
    type Error = StoreError;

    fn try_from(named: NamedRecord) -> Result<Self, StoreError> {
        Ok(NamedRow {
            row: named.record.try_into()?,
            names: named.names.0,
        })
    }
}

/// A `matches` row as a list page holds it, with names and ratings as JSON objects.
#[derive(sqlx::FromRow)]
struct ListedRecord {
    #[sqlx(flatten)]
    named: NamedRecord,
    ratings: Json<BTreeMap<Uuid, f64>>,
}

impl TryFrom<ListedRecord> for ListedRow {
    type Error = StoreError;

    fn try_from(listed: ListedRecord) -> Result<Self, StoreError> {
        Ok(ListedRow {
            named: listed.named.try_into()?,
            ratings: listed.ratings.0,
        })
    }
}

/// One match with its players' names.
pub const GET: &str = "SELECT m.id, m.snapshot, m.last_seq, m.created_at,
                (SELECT coalesce(jsonb_object_agg(p.id, p.name), '{}'::jsonb) FROM players p
                 WHERE p.id IN (m.creator, m.joiner, m.invited)) AS names
         FROM matches m WHERE m.id = $1";

/// One match with its players' names.
pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<NamedRow>, StoreError> {
    let row = sqlx::query_as::<_, NamedRecord>(GET)
        .bind(id)
        .fetch_optional(db)
        .await?;
    row.map(NamedRow::try_from).transpose()
}

/// Several matches with their players' names.
pub const GET_MANY: &str = "SELECT m.id, m.snapshot, m.last_seq, m.created_at,
                (SELECT coalesce(jsonb_object_agg(p.id, p.name), '{}'::jsonb) FROM players p
                 WHERE p.id IN (m.creator, m.joiner, m.invited)) AS names
         FROM matches m WHERE m.id = ANY($1)";

/// Several matches with their players' names, in no particular order (absent: no such
/// match).
pub async fn get_many(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<Vec<NamedRow>, StoreError> {
    let rows = sqlx::query_as::<_, NamedRecord>(GET_MANY)
        .bind(ids)
        .fetch_all(db)
        .await?;
    rows.into_iter().map(NamedRow::try_from).collect()
}

/// A page of `listing`, newest first, after `cursor`, at most `limit` rows.
pub async fn page(
    db: &PgPool,
    listing: Listing,
    cursor: Option<Cursor>,
    limit: i64,
) -> Result<Vec<ListedRow>, StoreError> {
    let subject = match listing {
        Listing::Open { viewer } => Some(viewer),
        Listing::Live | Listing::PlayerOf { .. } => None,
    };
    let query = match listing {
        Listing::Open { .. } => sqlx::query_as::<_, ListedRecord>(
            "SELECT m.id, m.snapshot, m.last_seq, m.created_at,
                (SELECT coalesce(jsonb_object_agg(p.id, p.name), '{}'::jsonb) FROM players p
                 WHERE p.id IN (m.creator, m.joiner, m.invited)) AS names,
                (SELECT coalesce(jsonb_object_agg(r.player_id, r.rating), '{}'::jsonb) FROM ratings r
                 WHERE r.ruleset = m.ruleset AND r.player_id IN (m.creator, m.joiner)) AS ratings
         FROM matches m
         WHERE m.phase = 'waiting' AND (m.invited IS NULL OR m.invited = $1 OR m.creator = $1) AND ($2::timestamptz IS NULL OR (m.created_at, m.id) < ($2, $3))
         ORDER BY m.created_at DESC, m.id DESC LIMIT $4",
        ),
        Listing::Live => sqlx::query_as::<_, ListedRecord>(
            "SELECT m.id, m.snapshot, m.last_seq, m.created_at,
                (SELECT coalesce(jsonb_object_agg(p.id, p.name), '{}'::jsonb) FROM players p
                 WHERE p.id IN (m.creator, m.joiner, m.invited)) AS names,
                (SELECT coalesce(jsonb_object_agg(r.player_id, r.rating), '{}'::jsonb) FROM ratings r
                 WHERE r.ruleset = m.ruleset AND r.player_id IN (m.creator, m.joiner)) AS ratings
         FROM matches m
         WHERE m.phase IN ('placement', 'battle') AND $1::uuid IS NULL AND ($2::timestamptz IS NULL OR (m.created_at, m.id) < ($2, $3))
         ORDER BY m.created_at DESC, m.id DESC LIMIT $4",
        ),
        Listing::PlayerOf { player } => {
            return player_page(db, player, cursor, limit).await;
        }
    };
    let rows = query
        .bind(subject)
        .bind(cursor.map(|c| c.created_at))
        .bind(cursor.map(|c| c.id))
        .bind(limit)
        .fetch_all(db)
        .await?;
    rows.into_iter().map(ListedRow::try_from).collect()
}

/// A page of `player`'s matches: the ids from the player's own rows (one descent of their
/// index, on Citus one shard), then those matches' rows, in the page's order.
async fn player_page(
    db: &PgPool,
    player: Uuid,
    cursor: Option<Cursor>,
    limit: i64,
) -> Result<Vec<ListedRow>, StoreError> {
    let ids = super::player_matches::page(db, player, cursor, limit).await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows = sqlx::query_as::<_, ListedRecord>(
        "SELECT m.id, m.snapshot, m.last_seq, m.created_at,
                (SELECT coalesce(jsonb_object_agg(p.id, p.name), '{}'::jsonb) FROM players p
                 WHERE p.id IN (m.creator, m.joiner, m.invited)) AS names,
                (SELECT coalesce(jsonb_object_agg(r.player_id, r.rating), '{}'::jsonb) FROM ratings r
                 WHERE r.ruleset = m.ruleset AND r.player_id IN (m.creator, m.joiner)) AS ratings
         FROM matches m WHERE m.id = ANY($1)",
    )
    .bind(&ids)
    .fetch_all(db)
    .await?;
    rows.sort_by_key(|listed| ids.iter().position(|id| *id == listed.named.record.id));
    rows.into_iter().map(ListedRow::try_from).collect()
}
