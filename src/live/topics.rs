//! The two kinds of topic a stream follows: a match's events (redacted per subscriber)
//! and a player's notices. Everything that differs between them is here; the registry,
//! the fetches, the sweep and the feeds are generic over [`Kind`].

use std::collections::VecDeque;

use sqlx::PgPool;
use uuid::Uuid;

use super::registry::Registry;
use super::{Inner, LiveError};
use crate::app::{EVENTS_CHANNEL, EVENTS_PAGE, EventResource, viewer_of};
use crate::engine::{Event, Match};
use crate::store::notices::{self, Notice};
use crate::store::{self, StoreError, StoredEvent};

/// A kind of topic: where its positions are announced, how its new entries are read once
/// for all subscribers, and how a subscriber turns them into the items of its stream.
pub(super) trait Kind: Sized + Send + Sync + 'static {
    /// New entries of a topic as read once for all its subscribers on this replica.
    type Batch: Send + Sync + 'static;
    /// What a stream of this kind yields.
    type Item: Send + 'static;
    /// The channel on which commits announce `id:seq` positions of this kind.
    const CHANNEL: &'static str;
    /// For logs.
    const NAME: &'static str;

    fn registry(inner: &Inner) -> &Registry<Self::Batch>;

    /// The committed positions of the topics `ids` (absent ones are left out).
    fn positions(
        pool: &PgPool,
        ids: &[Uuid],
    ) -> impl Future<Output = Result<Vec<(Uuid, i64)>, StoreError>> + Send;

    /// What was committed after `after`; `None` when nothing was.
    fn read(
        pool: &PgPool,
        id: Uuid,
        after: i64,
    ) -> impl Future<Output = Result<Option<Read<Self::Batch>>, StoreError>> + Send;

    /// Where the topic stands, and every item after `after` up to there, for `caller`.
    fn catch_up(
        pool: &PgPool,
        id: Uuid,
        caller: Uuid,
        after: i64,
    ) -> impl Future<Output = Result<CatchUp<Self::Item>, LiveError>> + Send;

    /// Sequence number of the batch's first entry.
    fn first_seq(batch: &Self::Batch) -> Option<i64>;

    /// Adds the batch's items after `last_sent` to `out` for `caller`, moving `last_sent`
    /// on. Returns whether the stream goes on.
    fn deliver(
        batch: &Self::Batch,
        caller: Uuid,
        last_sent: &mut i64,
        out: &mut VecDeque<Self::Item>,
    ) -> bool;
}

/// One read of a topic: the batch, the sequence number it ends at, and the highest one
/// seen committed while reading.
pub(super) struct Read<B> {
    pub batch: B,
    pub delivered: i64,
    pub seen: i64,
}

/// What a stream sends before it follows the topic live.
pub(super) struct CatchUp<I> {
    /// The topic's position the items run up to.
    pub position: i64,
    pub items: VecDeque<I>,
    /// Nothing can follow (a match that is over): the stream ends after `items`.
    pub over: bool,
}

/// A match's events, redacted for each subscriber's viewer.
pub(super) struct MatchEvents;

/// New events of a match.
pub(super) struct MatchBatch {
    /// The match after `last_seq`: what every subscriber redacts with.
    state: Match,
    last_seq: i64,
    /// Events after the previous batch, in order, none after `last_seq`.
    events: Vec<StoredEvent>,
}

fn resource(stored: &StoredEvent, event: Event) -> EventResource {
    EventResource {
        seq: stored.seq,
        at: stored.at,
        event,
    }
}

impl Kind for MatchEvents {
    type Batch = MatchBatch;
    type Item = EventResource;
    const CHANNEL: &'static str = EVENTS_CHANNEL;
    const NAME: &'static str = "match";

    fn registry(inner: &Inner) -> &Registry<MatchBatch> {
        &inner.matches
    }

    async fn positions(pool: &PgPool, ids: &[Uuid]) -> Result<Vec<(Uuid, i64)>, StoreError> {
        store::matches::positions(pool, ids).await
    }

    async fn read(
        pool: &PgPool,
        id: Uuid,
        after: i64,
    ) -> Result<Option<Read<MatchBatch>>, StoreError> {
        // The row first: events read after it may run ahead of it, and are cut at its
        // `last_seq`, so the state each subscriber redacts with is never older than the
        // events it redacts.
        let Some(row) = store::matches::get(pool, id).await? else {
            return Ok(None);
        };
        if row.last_seq <= after {
            return Ok(None);
        }
        let mut events = store::events::list(pool, id, after, EVENTS_PAGE).await?;
        events.retain(|event| event.seq <= row.last_seq);
        Ok(Some(Read {
            delivered: events.last().map_or(after, |event| event.seq),
            seen: row.last_seq,
            batch: MatchBatch {
                state: row.state,
                last_seq: row.last_seq,
                events,
            },
        }))
    }

    async fn catch_up(
        pool: &PgPool,
        id: Uuid,
        caller: Uuid,
        after: i64,
    ) -> Result<CatchUp<EventResource>, LiveError> {
        let row = store::matches::get(pool, id)
            .await?
            .ok_or(LiveError::NotFound)?;
        let viewer = viewer_of(&row.state, caller);
        let mut items = VecDeque::new();
        let mut cursor = after;
        while cursor < row.last_seq {
            let page = store::events::list(pool, id, cursor, EVENTS_PAGE).await?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            for stored in page.iter().filter(|stored| stored.seq <= row.last_seq) {
                items.push_back(resource(stored, row.state.redact(&stored.event, viewer)));
            }
        }
        Ok(CatchUp {
            position: row.last_seq,
            items,
            over: row.state.phase.is_over(),
        })
    }

    fn first_seq(batch: &MatchBatch) -> Option<i64> {
        batch.events.first().map(|event| event.seq)
    }

    fn deliver(
        batch: &MatchBatch,
        caller: Uuid,
        last_sent: &mut i64,
        out: &mut VecDeque<EventResource>,
    ) -> bool {
        let viewer = viewer_of(&batch.state, caller);
        for stored in &batch.events {
            if stored.seq > *last_sent {
                out.push_back(resource(stored, batch.state.redact(&stored.event, viewer)));
                *last_sent = stored.seq;
            }
        }
        !(batch.state.phase.is_over() && *last_sent >= batch.last_seq)
    }
}

/// A player's own notices.
pub(super) struct PlayerNotices;

impl Kind for PlayerNotices {
    /// New notices of a player.
    type Batch = Vec<Notice>;
    type Item = Notice;
    const CHANNEL: &'static str = notices::CHANNEL;
    const NAME: &'static str = "player";

    fn registry(inner: &Inner) -> &Registry<Vec<Notice>> {
        &inner.players
    }

    async fn positions(pool: &PgPool, ids: &[Uuid]) -> Result<Vec<(Uuid, i64)>, StoreError> {
        notices::positions(pool, ids).await
    }

    async fn read(
        pool: &PgPool,
        player: Uuid,
        after: i64,
    ) -> Result<Option<Read<Vec<Notice>>>, StoreError> {
        let notices = notices::list(pool, player, after, EVENTS_PAGE).await?;
        Ok(notices.last().map(|notice| notice.seq).map(|last| Read {
            batch: notices,
            delivered: last,
            seen: last,
        }))
    }

    async fn catch_up(
        pool: &PgPool,
        player: Uuid,
        _caller: Uuid,
        after: i64,
    ) -> Result<CatchUp<Notice>, LiveError> {
        let position = notices::positions(pool, &[player])
            .await?
            .first()
            .map_or(0, |(_, seq)| *seq);
        let mut items = VecDeque::new();
        let mut cursor = after;
        while cursor < position {
            let page = notices::list(pool, player, cursor, EVENTS_PAGE).await?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            items.extend(page.into_iter().filter(|notice| notice.seq <= position));
        }
        Ok(CatchUp {
            position,
            items,
            over: false,
        })
    }

    fn first_seq(batch: &Vec<Notice>) -> Option<i64> {
        batch.first().map(|notice| notice.seq)
    }

    fn deliver(
        batch: &Vec<Notice>,
        _caller: Uuid,
        last_sent: &mut i64,
        out: &mut VecDeque<Notice>,
    ) -> bool {
        for notice in batch {
            if notice.seq > *last_sent {
                out.push_back(notice.clone());
                *last_sent = notice.seq;
            }
        }
        true
    }
}
