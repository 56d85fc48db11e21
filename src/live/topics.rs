//! The two kinds of topic a stream follows, each a [`Topic`]: a match's events
//! ([`Matches`], redacted for each viewer with the match's state, ending when the match
//! is over) and a player's own notices ([`Players`], never ending).

use std::collections::{BTreeMap, HashMap};

use sqlx::PgPool;
use uuid::Uuid;

use chrono::{DateTime, Utc};

use super::feed::{Batch, Topic, Topics};
use crate::app::{
    CommittedMatch, EVENTS_PAGE, EventResource, MatchResource, MatchState, Presence,
    PresenceChange, PresenceKind, viewer_of,
};
use crate::engine::{Match, Viewer};
use crate::store::notices::{self, Notice};
use crate::store::{self, StoreError, StoredEvent};

/// A match's events, as participants and spectators may see them.
pub struct Matches;

/// What a match's events are shown with.
pub struct MatchContext {
    /// The match as of the batch's end: what every subscriber redacts with.
    pub state: Match,
    /// The names of the match's players, by id.
    pub names: BTreeMap<Uuid, String>,
    pub created_at: DateTime<Utc>,
}

/// What a match stream sends: first, when opened without a resume point, the caller's
/// whole view; then events.
#[derive(Debug)]
// Events are nearly every item: the rare `state` is boxed, events stay inline.
#[allow(clippy::large_enum_variant)]
pub enum MatchItem {
    State(Box<MatchState>),
    Event(EventResource),
    Presence(PresenceChange),
}

impl Topic for Matches {
    type Context = MatchContext;
    type Record = StoredEvent;
    type Viewer = Viewer;
    type Item = MatchItem;

    const NAME: &'static str = "match";

    async fn read_head(pool: &PgPool, id: Uuid) -> Result<Option<Batch<Self>>, StoreError> {
        let Some(store::listing::NamedRow { row, names }) = store::listing::get(pool, id).await?
        else {
            return Ok(None);
        };
        Ok(Some(Batch {
            context: MatchContext {
                state: row.state,
                names,
                created_at: row.created_at,
            },
            end: row.last_seq,
            records: Vec::new(),
        }))
    }

    async fn read_records(
        pool: &PgPool,
        id: Uuid,
        after: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        store::events::list(pool, id, after, EVENTS_PAGE).await
    }

    async fn read_batches(
        pool: &PgPool,
        topics: &[(Uuid, i64)],
    ) -> Result<Vec<(Uuid, Batch<Self>)>, StoreError> {
        // The rows first: events read after them may run ahead of them, and are cut at each
        // row's `last_seq`, so the state each subscriber redacts with is never older than
        // the events it redacts.
        let ids: Vec<Uuid> = topics.iter().map(|(id, _)| *id).collect();
        let delivered: HashMap<Uuid, i64> = topics.iter().copied().collect();
        let mut batches: HashMap<Uuid, Batch<Self>> = HashMap::new();
        let mut ranges = Vec::new();
        for store::listing::NamedRow { row, names } in store::listing::get_many(pool, &ids).await? {
            let Some(&after) = delivered.get(&row.id) else {
                continue;
            };
            if row.last_seq <= after {
                continue;
            }
            ranges.push((
                row.id,
                after,
                row.last_seq.min(after.saturating_add(EVENTS_PAGE)),
            ));
            batches.insert(
                row.id,
                Batch {
                    context: MatchContext {
                        state: row.state,
                        names,
                        created_at: row.created_at,
                    },
                    end: row.last_seq,
                    records: Vec::new(),
                },
            );
        }
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        for (id, event) in store::events::list_ranges(pool, &ranges).await? {
            if let Some(batch) = batches.get_mut(&id) {
                batch.records.push(event);
            }
        }
        Ok(batches.into_iter().collect())
    }

    async fn read_positions(pool: &PgPool, ids: &[Uuid]) -> Result<Vec<(Uuid, i64)>, StoreError> {
        store::matches::positions(pool, ids).await
    }

    fn seq(record: &StoredEvent) -> i64 {
        record.seq
    }

    fn viewer(context: &MatchContext, caller: Uuid) -> Viewer {
        viewer_of(&context.state, caller)
    }

    fn item(context: &MatchContext, viewer: &Viewer, record: &StoredEvent) -> MatchItem {
        MatchItem::Event(EventResource::new(
            record,
            &context.state,
            *viewer,
            context.names.clone(),
        ))
    }

    /// The caller's view at the head, its clock counted by the database's time.
    async fn snapshot(
        pool: &PgPool,
        id: Uuid,
        head: &Batch<Self>,
        caller: Uuid,
    ) -> Result<Option<MatchItem>, StoreError> {
        let now = store::now(pool).await?;
        let context = &head.context;
        let mut view = MatchResource::render(
            id,
            &context.state,
            head.end,
            context.created_at,
            caller,
            now,
        );
        view.names = context.names.clone();
        Ok(Some(MatchItem::State(Box::new(MatchState::new(view)))))
    }

    fn finished(context: &MatchContext) -> bool {
        context.state.phase.is_over()
    }

    fn participants(context: &MatchContext) -> Vec<Uuid> {
        context.state.players()
    }

    fn presence_item(player: Uuid, online: bool) -> Option<MatchItem> {
        Some(MatchItem::Presence(PresenceChange {
            kind: PresenceKind::Presence,
            player,
            presence: Presence::of(online),
        }))
    }

    fn with_presence(item: &mut MatchItem, online: &[Uuid]) {
        if let MatchItem::State(state) = item {
            state.view.set_presence(online);
        }
    }
}

/// A player's own notices: challenges, opponents joining, pairings, rematch offers.
pub struct Players;

impl Topic for Players {
    type Context = ();
    type Record = Notice;
    type Viewer = ();
    type Item = Notice;

    const NAME: &'static str = "player";

    /// Every player has a feed, if only an empty one (position 0).
    async fn read_head(pool: &PgPool, player: Uuid) -> Result<Option<Batch<Self>>, StoreError> {
        let end = Self::read_positions(pool, &[player])
            .await?
            .first()
            .map_or(0, |(_, seq)| *seq);
        Ok(Some(Batch {
            context: (),
            end,
            records: Vec::new(),
        }))
    }

    async fn read_records(
        pool: &PgPool,
        player: Uuid,
        after: i64,
    ) -> Result<Vec<Notice>, StoreError> {
        notices::list(pool, player, after, EVENTS_PAGE).await
    }

    /// Notices need no context, so each player's page alone is the batch, ending at its
    /// last notice.
    async fn read_batches(
        pool: &PgPool,
        feeds: &[(Uuid, i64)],
    ) -> Result<Vec<(Uuid, Batch<Self>)>, StoreError> {
        let mut batches: HashMap<Uuid, Batch<Self>> = HashMap::new();
        for (player, notice) in notices::list_many(pool, feeds, EVENTS_PAGE).await? {
            let batch = batches.entry(player).or_insert_with(|| Batch {
                context: (),
                end: 0,
                records: Vec::new(),
            });
            batch.end = notice.seq;
            batch.records.push(notice);
        }
        Ok(batches.into_iter().collect())
    }

    async fn read_positions(
        pool: &PgPool,
        players: &[Uuid],
    ) -> Result<Vec<(Uuid, i64)>, StoreError> {
        notices::positions(pool, players).await
    }

    fn seq(record: &Notice) -> i64 {
        record.seq
    }

    fn viewer((): &(), _caller: Uuid) {}

    fn item((): &(), (): &(), record: &Notice) -> Notice {
        record.clone()
    }

    /// A feed's state is its notices: a fresh feed starts with every notice still kept.
    async fn snapshot(
        _pool: &PgPool,
        _player: Uuid,
        _head: &Batch<Self>,
        _caller: Uuid,
    ) -> Result<Option<Notice>, StoreError> {
        Ok(None)
    }

    fn finished((): &()) -> bool {
        false
    }
}

/// Publishes a match change committed on this replica to its subscribers here, from memory:
/// the state and events the write path committed, shown with the names of the match's last
/// batch. When it does not follow what was delivered, or names a player the last batch did
/// not (a player joined), the match is read instead.
pub(super) fn offer_commit(topics: &Topics<Matches>, change: CommittedMatch) {
    let CommittedMatch {
        id,
        after,
        last_seq,
        at,
        created_at,
        state,
        events,
    } = change;
    topics.offer(id, after, last_seq, move |last| {
        let names = &last?.context.names;
        let named = state
            .players()
            .into_iter()
            .chain(state.invited)
            .all(|player| names.contains_key(&player));
        if !named {
            return None;
        }
        Some(Batch {
            context: MatchContext {
                state,
                names: names.clone(),
                created_at,
            },
            end: last_seq,
            records: (after + 1..)
                .zip(events)
                .map(|(seq, event)| StoredEvent { seq, at, event })
                .collect(),
        })
    });
}
