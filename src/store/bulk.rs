//! Bulk loading for benchmarks and tools: whole engine-made matches (their rows, event logs
//! and rating history), players and standings, written with `COPY` in the shapes the write
//! path stores, so a database of years of play is built in minutes.
//!
//! A load runs with `session_replication_role = replica` (a superuser's setting): foreign
//! keys and triggers are not checked row by row, as in any bulk load of data known to be
//! consistent. What the phase-count trigger would have appended is appended once at the end.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::StoreError;
use super::ratings::score_str;
use super::{StoredEvent, matches};
use crate::engine::{Event, Match, Rating};
use crate::names::PlayerName;

/// A finished (or otherwise whole) match to load: its final state and its whole log.
pub struct LoadedMatch {
    pub id: Uuid,
    pub state: Match,
    pub events: Vec<StoredEvent>,
    pub created_at: DateTime<Utc>,
}

/// A player's standing on one ladder after the loaded history.
pub struct LoadedStanding {
    pub ruleset: &'static str,
    pub player: Uuid,
    /// The player's name, which the standing keeps for the ladder page.
    pub name: String,
    pub rating: Rating,
    pub games: u32,
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    pub updated_at: DateTime<Utc>,
}

/// One field of a `COPY … FROM STDIN` text row.
trait Field {
    fn put(&self, row: &mut String);
}

impl Field for &str {
    fn put(&self, row: &mut String) {
        for c in self.chars() {
            match c {
                '\\' => row.push_str("\\\\"),
                '\t' => row.push_str("\\t"),
                '\n' => row.push_str("\\n"),
                '\r' => row.push_str("\\r"),
                c => row.push(c),
            }
        }
    }
}

impl Field for String {
    fn put(&self, row: &mut String) {
        self.as_str().put(row);
    }
}

impl Field for Uuid {
    fn put(&self, row: &mut String) {
        let _ = write!(row, "{self}");
    }
}

impl Field for i64 {
    fn put(&self, row: &mut String) {
        let _ = write!(row, "{self}");
    }
}

impl Field for u32 {
    fn put(&self, row: &mut String) {
        let _ = write!(row, "{self}");
    }
}

impl Field for f64 {
    fn put(&self, row: &mut String) {
        // Shortest text that reads back as the same double.
        let _ = write!(row, "{self:?}");
    }
}

impl Field for bool {
    fn put(&self, row: &mut String) {
        row.push(if *self { 't' } else { 'f' });
    }
}

impl Field for DateTime<Utc> {
    fn put(&self, row: &mut String) {
        row.push_str(&self.to_rfc3339_opts(SecondsFormat::AutoSi, true));
    }
}

impl<T: Field> Field for Option<T> {
    fn put(&self, row: &mut String) {
        match self {
            Some(value) => value.put(row),
            None => row.push_str("\\N"),
        }
    }
}

/// Appends one row of `fields` to `buffer`.
fn row(buffer: &mut String, fields: &[&dyn Field]) {
    for (n, field) in fields.iter().enumerate() {
        if n > 0 {
            buffer.push('\t');
        }
        field.put(buffer);
    }
    buffer.push('\n');
}

fn json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

async fn copy(conn: &mut PgConnection, statement: &str, data: String) -> Result<(), StoreError> {
    if data.is_empty() {
        return Ok(());
    }
    let mut copy = conn.copy_in_raw(statement).await?;
    copy.send(data.into_bytes()).await?;
    copy.finish().await?;
    Ok(())
}

/// Turns row-by-row checks off for the rest of the session (see the module's comment).
pub async fn begin_load(conn: &mut PgConnection) -> Result<(), StoreError> {
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Turns the checks back on, counts what is derived from the loaded rows (the ladders'
/// rating buckets, the players' records) and appends the phase deltas of the `loaded`
/// matches per phase.
pub async fn end_load(conn: &mut PgConnection, loaded: &[(&str, i64)]) -> Result<(), StoreError> {
    sqlx::query("RESET session_replication_role")
        .execute(&mut *conn)
        .await?;
    super::ratings::recount_buckets(&mut *conn).await?;
    super::player_matches::recount_records(&mut *conn).await?;
    for (phase, count) in loaded {
        sqlx::query("INSERT INTO match_phase_deltas (phase, delta) VALUES ($1, $2)")
            .bind(phase)
            .bind(i32::try_from(*count).unwrap_or(i32::MAX))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Loads players (humans, no password) created at `at`.
pub async fn copy_players(
    conn: &mut PgConnection,
    players: &[(Uuid, PlayerName)],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut data = String::with_capacity(players.len() * 96);
    for (id, name) in players {
        row(&mut data, &[id, &name.as_str(), &name.key(), &at]);
    }
    copy(
        conn,
        "COPY players (id, name, name_key, created_at) FROM STDIN",
        data,
    )
    .await
}

/// Loads whole matches: each row as the write path leaves it after the last event, every
/// event, and the rating history rows of every `rating_updated` among them.
pub async fn copy_matches(
    conn: &mut PgConnection,
    loaded: &[LoadedMatch],
) -> Result<(), StoreError> {
    let mut rows = String::with_capacity(loaded.len() * 2048);
    let mut log = String::with_capacity(loaded.len() * 110 * 200);
    let mut history = String::new();
    let mut mirrors = String::new();
    for m in loaded {
        let state = &m.state;
        let ended_at = m.events.last().map_or(m.created_at, |event| event.at);
        for mirror in super::player_matches::rows_of(m.id, state, m.created_at) {
            row(
                &mut mirrors,
                &[
                    &mirror.player_id,
                    &mirror.match_id,
                    &mirror.role,
                    &mirror.opponent,
                    &mirror.ruleset,
                    &mirror.ranked,
                    &mirror.status,
                    &mirror.result,
                    &mirror.created_at,
                    &state.phase.is_over().then_some(ended_at),
                ],
            );
        }
        let creator = state
            .player(0)
            .ok_or_else(|| StoreError::Corrupt("no creator".into()))?;
        let copy = matches::columns(state)?;
        let last_seq = m.events.last().map_or(0, |event| event.seq);
        let updated_at = m.events.last().map_or(m.created_at, |event| event.at);
        let snapshot = json(&copy.snapshot.0)?;
        row(
            &mut rows,
            &[
                &m.id,
                &state.rules.ruleset.as_str(),
                &state.ranked,
                &copy.phase,
                &creator,
                &copy.joiner,
                &state.invited,
                &copy.turn,
                &copy.deadline,
                &copy.deadline,
                &copy.winner,
                &copy.reason,
                &last_seq,
                &snapshot,
                &m.created_at,
                &updated_at,
                &state.phase.is_over().then_some(updated_at),
            ],
        );
        for stored in &m.events {
            let event = &stored.event;
            row(
                &mut log,
                &[
                    &m.id,
                    &stored.seq,
                    &stored.at,
                    &event.actor(),
                    &event.kind(),
                    &json(event)?,
                ],
            );
            if let Event::RatingUpdated { ruleset, changes } = event {
                for change in changes {
                    let opponent = changes
                        .iter()
                        .find(|other| other.player != change.player)
                        .map(|other| other.player)
                        .ok_or_else(|| StoreError::Corrupt("a lone rating change".into()))?;
                    let (before, after) = (change.before, change.after);
                    row(
                        &mut history,
                        &[
                            &m.id,
                            &stored.seq,
                            &change.player,
                            &opponent,
                            &ruleset.as_str(),
                            &stored.at,
                            &score_str(change.score),
                            &change.game,
                            &before.rating,
                            &before.deviation,
                            &before.volatility,
                            &after.rating,
                            &after.deviation,
                            &after.volatility,
                        ],
                    );
                }
            }
        }
    }
    copy(
        conn,
        "COPY matches (id, ruleset, ranked, phase, creator, joiner, invited, turn, deadline,
                       wake_at, winner, reason, last_seq, snapshot, created_at, updated_at,
                       ended_at)
         FROM STDIN",
        rows,
    )
    .await?;
    copy(
        conn,
        "COPY match_events (match_id, seq, at, actor, kind, payload) FROM STDIN",
        log,
    )
    .await?;
    copy(
        conn,
        "COPY player_matches (player_id, match_id, role, opponent, ruleset, ranked, status,
                              result, created_at, ended_at)
         FROM STDIN",
        mirrors,
    )
    .await?;
    copy(
        conn,
        "COPY rating_changes (match_id, seq, player_id, opponent_id, ruleset, at, score, game,
                              rating_before, deviation_before, volatility_before,
                              rating_after, deviation_after, volatility_after)
         FROM STDIN",
        history,
    )
    .await
}

/// Loads the standings the history left (their buckets are counted by [`end_load`]).
pub async fn copy_standings(
    conn: &mut PgConnection,
    standings: &[LoadedStanding],
) -> Result<(), StoreError> {
    let mut data = String::with_capacity(standings.len() * 160);
    for s in standings {
        row(
            &mut data,
            &[
                &s.ruleset,
                &s.player,
                &s.name.as_str(),
                &s.rating.rating,
                &s.rating.deviation,
                &s.rating.volatility,
                &s.games,
                &s.wins,
                &s.losses,
                &s.draws,
                &s.updated_at,
            ],
        );
    }
    copy(
        conn,
        "COPY ratings (ruleset, player_id, name, rating, deviation, volatility, games, wins,
                       losses, draws, updated_at)
         FROM STDIN",
        data,
    )
    .await
}

/// The events a loaded match's log would hold, numbered from 1, each at its own time.
pub fn numbered(events: Vec<(DateTime<Utc>, Event)>) -> Vec<StoredEvent> {
    (1..)
        .zip(events)
        .map(|(seq, (at, event))| StoredEvent { seq, at, event })
        .collect()
}

/// Disk used by the tables of play (with their indexes and TOAST), in bytes.
pub async fn bytes_of_play(conn: &mut PgConnection) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT t, pg_total_relation_size(t::regclass)
         FROM unnest(ARRAY['matches', 'match_events', 'rating_changes', 'ratings',
                           'rating_buckets', 'players', 'player_matches', 'player_records'])
              AS t ORDER BY t",
    )
    .fetch_all(conn)
    .await?)
}
