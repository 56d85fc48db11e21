//! The one write path: every change to a match — a player's command, a new match, a
//! pairing, a rematch, a clock running out or given back — is folded, settled, appended
//! and written here, for one match or a batch of many, in the caller's transaction, and
//! collected in a [`Committed`] that is told only after that transaction commits, so
//! nothing announces an event that was rolled back.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::committed::{Committed, CommittedMatch, Tx};
use super::{AppError, Result, ladder};
use crate::engine::{CancelReason, Command, Event, Match, Refusal};
use crate::store::citus::Kind;
use crate::store::idempotency::{Answer, KeyRef};
use crate::store::matches::{Append, MatchRow, RowWrite, Write};
use crate::store::player_matches::{self, Mirror};
use crate::store::{StoreError, StoredEvent, matches, notices};

/// One match's change: its state before, and the events the engine decided for it.
pub(crate) struct Change {
    id: Uuid,
    /// The match's row does not exist yet: it is inserted with the change.
    new: bool,
    /// Events already in the match's log.
    last_seq: i64,
    state: Match,
    events: Vec<Event>,
    /// How many of `events` `state` already holds (a new match's state is its creation).
    folded: usize,
    created_at: DateTime<Utc>,
}

impl Change {
    /// Whether storing it is [`write`]'s one statement and nothing else: an existing match
    /// whose events neither end it (a rating to settle), seat a player nor create a match
    /// (player notices). A batch of such changes needs no transaction around its write.
    pub fn stands_alone(&self) -> bool {
        !self.new
            && self.events.iter().all(|event| {
                !matches!(
                    event,
                    Event::MatchCreated { .. }
                        | Event::PlayerJoined { .. }
                        | Event::MatchFinished { .. }
                        | Event::MatchCancelled { .. }
                        | Event::RatingUpdated { .. }
                )
            })
    }

    /// Whether folding it settles a rating: it finishes a ranked match, so the players'
    /// standings are locked for it. Every path locks a match's row before its players'
    /// standings, so a change decided from a kept state that settles a rating has its row
    /// locked before it is folded.
    pub fn settles_rating(&self) -> bool {
        self.state.ranked
            && self
                .events
                .iter()
                .any(|event| matches!(event, Event::MatchFinished { .. }))
    }

    pub fn id(&self) -> Uuid {
        self.id
    }

    /// A change to a match whose row exists and is locked.
    pub fn existing(row: MatchRow, events: Vec<Event>) -> Self {
        Change {
            id: row.id,
            new: false,
            last_seq: row.last_seq,
            state: row.state,
            events,
            folded: 0,
            created_at: row.created_at,
        }
    }

    /// A new match created at `now`: `events` start with its `match_created`.
    pub fn new_match(id: Uuid, events: Vec<Event>, now: DateTime<Utc>) -> Result<Self> {
        let state = Match::fold(events.first()).map_err(|e| AppError::Corrupt(e.to_string()))?;
        Ok(Change {
            id,
            new: true,
            last_seq: 0,
            state,
            events,
            folded: 1,
            created_at: now,
        })
    }
}

/// What a participant's command comes to against its locked match.
pub(crate) enum Judged {
    /// The engine accepted it: the change it makes.
    Accepted(Change),
    /// The match's clock ran out before the command arrived and nobody enforced it yet:
    /// the change enforces it, and the command is refused as the ended match refuses it.
    Expired(Change, Refusal),
    /// The engine refused it; nothing changes.
    Refused(Refusal),
}

/// Judges `actor`'s `command` against the locked match `row` at `now`: the one place that
/// enforces a clock that ran out before deciding a command (players' commands and bots'
/// moves alike).
pub(crate) fn judge(row: MatchRow, actor: Uuid, command: &Command, now: DateTime<Utc>) -> Judged {
    if let Ok(expiry) = row.state.expire(now) {
        let mut ended = row.state.clone();
        ended.evolve_all(&expiry);
        let refusal = ended
            .decide(actor, command, now, super::draw())
            .err()
            .unwrap_or(Refusal::NotDue);
        return Judged::Expired(Change::existing(row, expiry), refusal);
    }
    match row.state.decide(actor, command, now, super::draw()) {
        Ok(events) => Judged::Accepted(Change::existing(row, events)),
        Err(refusal) => Judged::Refused(refusal),
    }
}

/// A change folded into its new state, with the events as they are stored.
#[derive(Debug)]
pub(crate) struct Folded {
    pub id: Uuid,
    pub new: bool,
    /// Whether the players' rows of an existing match change with it (it is seated,
    /// finished or cancelled): see [`player_matches`]. A new match's are stored with its row.
    pub mirrored: bool,
    pub created_at: DateTime<Utc>,
    pub after: i64,
    pub state: Match,
    pub events: Vec<Event>,
    pub last_seq: i64,
}

impl Folded {
    pub fn stored(&self, at: DateTime<Utc>) -> Vec<StoredEvent> {
        (1..)
            .zip(&self.events)
            .map(|(offset, event)| StoredEvent {
                seq: self.after + offset,
                at,
                event: event.clone(),
            })
            .collect()
    }
}

/// What a write stores besides the matches: answers under idempotency keys, and keys given
/// back by requests that ended refused.
#[derive(Default)]
pub(crate) struct Extras<'a> {
    pub answers: Vec<Answer<'a>>,
    pub releases: Vec<KeyRef<'a>>,
    /// Matches decided on the premise that their clock had not run out, with the deadline
    /// the database's clock must not have reached for the write to count.
    pub unexpired: HashMap<Uuid, DateTime<Utc>>,
}

/// Folds each change's events into its state; a change that finishes a ranked match gets
/// its `rating_updated` event (the players' standings are locked for it), so a result and
/// its rating change are one fact.
pub(crate) async fn fold(
    conn: &mut PgConnection,
    changes: Vec<Change>,
    now: DateTime<Utc>,
) -> Result<Vec<Folded>> {
    let mut folded = Vec::with_capacity(changes.len());
    let mut settled = ladder::Settled::default();
    for change in changes {
        let Change {
            id,
            new,
            last_seq,
            mut state,
            mut events,
            folded: already,
            created_at,
        } = change;
        let status_before = player_matches::status(state.phase);
        state.evolve_all(events.get(already..).unwrap_or_default());
        if let Some(rating) = ladder::settle(&mut *conn, &mut settled, &state, &events, now).await?
        {
            state.evolve_all(std::slice::from_ref(&rating));
            events.push(rating);
        }
        let added = i64::try_from(events.len()).unwrap_or(i64::MAX);
        let mirrored = !new && player_matches::status(state.phase) != status_before;
        folded.push(Folded {
            id,
            new,
            mirrored,
            created_at,
            after: last_seq,
            state,
            events,
            last_seq: last_seq.saturating_add(added),
        });
    }
    Ok(folded)
}

/// What became of a [`write`].
pub(crate) enum Stored {
    /// Everything was written; with the database's time during the write, if it was read.
    All(Option<DateTime<Utc>>),
    /// A row had moved past the state its change was decided on, or a clock the decision
    /// relied on had run out: nothing was stored, and a transaction around the write must
    /// be rolled back.
    Moved,
}

/// Stores folded changes: new rows first, then one statement that appends every event,
/// writes every existing row (each only if it is still at the sequence number the change
/// was decided on) and records `extras`; then the rating rows and the player notices the
/// events cause. What it stored is added to `told`, for the caller to tell once its
/// transaction commits (a write that ends [`Stored::Moved`] adds nothing).
pub(crate) async fn write(
    conn: &mut PgConnection,
    kind: Kind,
    folded: &[Folded],
    extras: Extras<'_>,
    now: DateTime<Utc>,
    told: &mut Committed,
) -> Result<Stored> {
    for change in folded.iter().filter(|change| change.new) {
        matches::insert(&mut *conn, change.id, &change.state, change.last_seq, now).await?;
    }
    let appends: Vec<Append<'_>> = folded
        .iter()
        .filter(|change| !change.events.is_empty())
        .map(|change| Append {
            match_id: change.id,
            after: change.after,
            events: &change.events,
        })
        .collect();
    let rows: Vec<RowWrite<'_>> = folded
        .iter()
        .filter(|change| !change.new && !change.events.is_empty())
        .map(|change| RowWrite {
            id: change.id,
            state: &change.state,
            after: change.after,
            last_seq: change.last_seq,
            unexpired_until: extras.unexpired.get(&change.id).copied(),
        })
        .collect();
    let mut read_now = None;
    if !appends.is_empty() || !extras.answers.is_empty() || !extras.releases.is_empty() {
        let written = matches::write(
            &mut *conn,
            kind,
            now,
            &Write {
                appends: &appends,
                rows: &rows,
                answers: &extras.answers,
                releases: &extras.releases,
            },
        )
        .await;
        match written {
            Ok(written) => read_now = Some(written.now),
            Err(StoreError::Moved) => return Ok(Stored::Moved),
            Err(error) => return Err(error.into()),
        }
    }
    let mirrors: Vec<Mirror<'_>> = folded
        .iter()
        .filter(|change| change.mirrored)
        .map(|change| Mirror {
            match_id: change.id,
            state: &change.state,
            created_at: change.created_at,
        })
        .collect();
    player_matches::store(&mut *conn, &mirrors, now).await?;
    let stored: Vec<(Uuid, Vec<StoredEvent>)> = folded
        .iter()
        .map(|change| (change.id, change.stored(now)))
        .collect();
    ladder::record(&mut *conn, &stored).await?;
    let notes: Vec<_> = folded.iter().flat_map(player_notices).collect();
    let mut written = Committed::default();
    written.matches.extend(
        folded
            .iter()
            .filter(|change| !change.events.is_empty())
            .map(|change| CommittedMatch {
                id: change.id,
                after: change.after,
                last_seq: change.last_seq,
                at: now,
                created_at: change.created_at,
                state: change.state.clone(),
                events: change.events.clone(),
            }),
    );
    push_notices(conn, notes, &mut written).await?;
    told.extend(written);
    Ok(Stored::All(read_now))
}

/// [`fold`] then [`write`], for use cases with nothing else to record.
pub(crate) async fn apply(
    tx: &mut Tx,
    kind: Kind,
    changes: Vec<Change>,
    now: DateTime<Utc>,
) -> Result<Vec<Folded>> {
    let (conn, told) = tx.parts();
    let folded = fold(&mut *conn, changes, now).await?;
    if let Stored::Moved = write(conn, kind, &folded, Extras::default(), now, told).await? {
        // The callers lock their rows before deciding, so nothing can move them.
        return Err(AppError::Corrupt(
            "a locked match row moved before its write".into(),
        ));
    }
    metrics::counter!("statki_events_total")
        .increment(folded.iter().map(|f| f.events.len() as u64).sum());
    Ok(folded)
}

/// What the events of a change tell players on their own feed beyond the match view: a
/// challenge addressed to them, an opponent taking the seat of their open match. A match
/// arranged with both seats taken at once (a pairing, a rematch) is told by its use case.
fn player_notices(change: &Folded) -> Vec<(Uuid, &'static str, serde_json::Value)> {
    let mut notes = Vec::new();
    let arranged = change.new && change.state.player(1).is_some();
    if arranged {
        return notes;
    }
    for event in &change.events {
        match event {
            Event::MatchCreated {
                creator,
                opponent: Some(opponent),
                rules,
                ranked,
                ..
            } => notes.push((
                *opponent,
                "challenge",
                json!({
                    "match_id": change.id, "from": creator, "ruleset": rules.ruleset,
                    "ranked": ranked,
                }),
            )),
            Event::MatchCancelled {
                reason: CancelReason::Declined,
            } => {
                if let (Some(creator), Some(invited)) =
                    (change.state.player(0), change.state.invited)
                {
                    notes.push((
                        creator,
                        "challenge_declined",
                        json!({ "match_id": change.id, "player": invited }),
                    ));
                }
            }
            Event::PlayerJoined { player, .. } => {
                if let Some(creator) = change.state.player(0) {
                    notes.push((
                        creator,
                        "opponent_joined",
                        json!({ "match_id": change.id, "player": player }),
                    ));
                }
            }
            _ => {}
        }
    }
    notes
}

/// Pushes notices in player-id order: every transaction that notifies several players
/// takes their feed locks in the same order, so two of them never deadlock. Each pushed
/// notice is added to `told`.
async fn push_notices(
    conn: &mut PgConnection,
    mut notes: Vec<(Uuid, &str, serde_json::Value)>,
    told: &mut Committed,
) -> Result<()> {
    notes.sort_by_key(|(player, _, _)| *player);
    for (player, kind, payload) in &notes {
        let seq = notices::push(&mut *conn, *player, kind, payload).await?;
        told.notices.push((*player, seq));
    }
    Ok(())
}

/// [`push_notices`] for a use case's own notices (a pairing, a rematch), in its
/// transaction.
pub(crate) async fn notify_players(
    tx: &mut Tx,
    notes: Vec<(Uuid, &str, serde_json::Value)>,
) -> Result<()> {
    let (conn, told) = tx.parts();
    push_notices(conn, notes, told).await
}
