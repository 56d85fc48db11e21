//! Reads a client renders without further round trips: a match view, pages of match lists
//! (open, live, a player's) and the event feed, each naming the players it mentions. The
//! names are joined on read, so commands (the shot path) never look them up.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{App, AppError, EVENTS_PAGE, EventResource, MatchResource, Result, ms_left, viewer_of};
use crate::engine::{Match, MatchResult, MatchRules, Phase, RuleSetId};
use crate::store::listing::{self, Cursor, Listing};
use crate::store::{self, players};

/// Default and largest page of a match list.
pub const LIST_PAGE_DEFAULT: i64 = 50;
pub const LIST_PAGE_MAX: i64 = 100;

/// A page of matches, newest first.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MatchPage {
    pub matches: Vec<MatchSummary>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// A list entry: who plays what, where the match stands, and how it ended; nothing of
/// either side (no shots, fleets or record). The caller's full view is
/// `GET /v1/matches/{id}`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MatchSummary {
    pub id: Uuid,
    pub ruleset: RuleSetId,
    /// The rules as played (house options and clocks).
    pub rules: MatchRules,
    pub ranked: bool,
    pub phase: Phase,
    /// Seat order: creator first.
    pub players: Vec<Uuid>,
    /// Whom a direct challenge is for.
    pub invited: Option<Uuid>,
    /// The caller's id when they hold a seat.
    pub you: Option<Uuid>,
    pub turn: Option<Uuid>,
    pub deadline: Option<DateTime<Utc>>,
    /// Milliseconds until `deadline`, by the server's clock.
    pub deadline_ms_left: Option<i64>,
    pub result: Option<MatchResult>,
    /// Sequence number of the latest event (the full view's `seq`).
    pub seq: i64,
    pub created_at: DateTime<Utc>,
    /// The name of every player the entry names, by id.
    pub names: std::collections::BTreeMap<Uuid, String>,
    /// The seated players' ratings on this rule set's ladder, by id (only those who have
    /// played a rated game on it; bots never have one).
    pub ratings: std::collections::BTreeMap<Uuid, f64>,
}

impl MatchSummary {
    fn new(listed: listing::ListedRow, viewer: Uuid, now: DateTime<Utc>) -> Self {
        let row = &listed.named.row;
        let state: &Match = &row.state;
        let seat = |seat: Option<usize>| seat.and_then(|seat| state.player(seat));
        Self {
            id: row.id,
            ruleset: state.rules.ruleset,
            rules: state.rules.effective(),
            ranked: state.ranked,
            phase: state.phase,
            players: state.players(),
            invited: state.invited,
            you: seat(state.seat_of(viewer)),
            turn: seat(state.turn),
            deadline: state.deadline,
            deadline_ms_left: ms_left(state.deadline, now),
            result: state.result,
            seq: row.last_seq,
            created_at: row.created_at,
            names: listed.named.names,
            ratings: listed.ratings,
        }
    }
}

/// The opaque cursor after a match: its creation time (microseconds) and id.
fn cursor(created_at: DateTime<Utc>, id: Uuid) -> String {
    format!("{}.{}", created_at.timestamp_micros(), id.simple())
}

/// Reads a cursor made by [`cursor`]: exactly the documented form
/// `^[0-9]{1,16}\.[0-9a-f]{32}$`, and every text of that form is a valid cursor.
pub fn parse_cursor(text: &str) -> Option<Cursor> {
    let (micros, id) = text.split_once('.')?;
    let digits =
        !micros.is_empty() && micros.len() <= 16 && micros.bytes().all(|b| b.is_ascii_digit());
    let hex = id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !digits || !hex {
        return None;
    }
    let created_at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
    Some(Cursor {
        created_at,
        id: Uuid::try_parse(id).ok()?,
    })
}

impl App {
    /// The match as `viewer` sees it, with its players' names.
    pub async fn view(&self, id: Uuid, viewer: Uuid) -> Result<MatchResource> {
        let named = listing::get(self.pool(), id)
            .await?
            .ok_or(AppError::NotFound("match"))?;
        let now = self.now().await?;
        let row = &named.row;
        let mut resource =
            MatchResource::render(id, &row.state, row.last_seq, row.created_at, viewer, now);
        resource.names = named.names;
        Ok(resource)
    }

    /// The events after `after` that `viewer` may see, redacted, with the names of the
    /// match's players.
    pub async fn events(&self, id: Uuid, viewer: Uuid, after: i64) -> Result<Vec<EventResource>> {
        let named = listing::get(self.pool(), id)
            .await?
            .ok_or(AppError::NotFound("match"))?;
        let events = store::events::list(self.pool(), id, after, EVENTS_PAGE).await?;
        let state = &named.row.state;
        let who = viewer_of(state, viewer);
        Ok(events
            .into_iter()
            .map(|stored| EventResource::new(&stored, state, who, named.names.clone()))
            .collect())
    }

    /// A page of `listing` as `viewer` sees it, newest first.
    pub async fn list_matches(
        &self,
        listing: Listing,
        viewer: Uuid,
        after: Option<Cursor>,
        limit: i64,
    ) -> Result<MatchPage> {
        // Lists may lag a little: the standby serves them when there is one.
        let mut rows = self
            .read_lagging(|pool| async move {
                if let Listing::PlayerOf { player } = listing {
                    players::get(&pool, player)
                        .await?
                        .ok_or(AppError::NotFound("player"))?;
                }
                // One row more than asked tells whether another page follows.
                Ok(listing::page(&pool, listing, after, limit + 1).await?)
            })
            .await?;
        let more = rows.len() as i64 > limit;
        rows.truncate(usize::try_from(limit).unwrap_or(0));
        let next = more
            .then(|| {
                rows.last()
                    .map(|last| cursor(last.named.row.created_at, last.named.row.id))
            })
            .flatten();
        let now = self.now().await?;
        let matches = rows
            .into_iter()
            .map(|listed| MatchSummary::new(listed, viewer, now))
            .collect();
        Ok(MatchPage { matches, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_exactly() {
        let id = Uuid::now_v7();
        let at = DateTime::from_timestamp_micros(1_790_000_000_123_456).expect("time");
        let parsed = parse_cursor(&cursor(at, id)).expect("cursor");
        assert_eq!((parsed.created_at, parsed.id), (at, id));
        assert!(parse_cursor("nonsense").is_none());
        assert!(parse_cursor("12.not-a-uuid").is_none());
        assert!(parse_cursor(&format!("-1.{}", id.simple())).is_none());
        assert!(parse_cursor(&format!("1.{}", id.hyphenated())).is_none());
        // The largest the pattern allows is still a time.
        assert!(parse_cursor(&format!("9999999999999999.{}", id.simple())).is_some());
    }
}
