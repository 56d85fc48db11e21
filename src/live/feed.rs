//! An open stream: the catch-up read from the database, then what the hub publishes on
//! the topic, de-duplicated by sequence number. Yields typed items; `http` renders them.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::stream::{BoxStream, Stream, StreamExt};
use tokio::sync::broadcast;
use uuid::Uuid;

use super::topics::Kind;
use super::{Inner, StreamPermit};

/// An open stream of `I` (a match's events or a player's notices).
pub struct Feed<I> {
    backlog: usize,
    stream: BoxStream<'static, I>,
}

impl<I: 'static> Feed<I> {
    /// Items that were ready to send, before waiting for live ones, when the feed opened.
    pub fn backlog(&self) -> usize {
        self.backlog
    }

    /// The stream: backlog first, then live items; it ends when the match is over, when
    /// the subscriber fell too far behind, or when the hub closes.
    pub fn into_stream(self) -> impl Stream<Item = I> + Send + 'static {
        self.stream
    }
}

/// A receiver on a topic that releases the topic with the last subscriber.
pub(super) struct Subscription<K: Kind> {
    rx: broadcast::Receiver<Arc<K::Batch>>,
    id: Uuid,
    inner: Arc<Inner>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Subscription<K> {
    pub(super) fn new(inner: Arc<Inner>, id: Uuid) -> Self {
        Self {
            rx: K::registry(&inner).subscribe(id, inner.settings.channel_capacity),
            id,
            inner,
            kind: PhantomData,
        }
    }

    /// Receives the next batch; `None` means the stream must end (closed, or too slow).
    async fn receive(&mut self) -> Option<Arc<K::Batch>> {
        match self.rx.recv().await {
            Ok(batch) => Some(batch),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                metrics::counter!("statki_live_slow_consumers_total").increment(1);
                tracing::debug!(missed, "dropping a stream that fell behind");
                None
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

impl<K: Kind> Drop for Subscription<K> {
    fn drop(&mut self) {
        K::registry(&self.inner).release(self.id);
    }
}

/// The live part of a stream: its subscription and the last item it sent.
pub(super) struct Live<K: Kind> {
    pub subscription: Subscription<K>,
    pub caller: Uuid,
    pub last_sent: i64,
}

impl<K: Kind> Live<K> {
    /// Adds the next batch's items to `out`. Returns whether the stream goes on.
    async fn next(&mut self, out: &mut VecDeque<K::Item>) -> bool {
        let Some(batch) = self.subscription.receive().await else {
            return false;
        };
        if K::first_seq(&batch).is_some_and(|first| first > self.last_sent + 1) {
            // Cannot happen while the hand-over is gapless; ending the stream makes the
            // client resume from the database rather than skip an item.
            tracing::warn!(topic = K::NAME, id = %self.subscription.id, "gap in a stream; closing it");
            return false;
        }
        K::deliver(&batch, self.caller, &mut self.last_sent, out)
    }
}

struct Follow<K: Kind> {
    pending: VecDeque<K::Item>,
    live: Option<Live<K>>,
    _permit: StreamPermit,
}

/// Opens a feed that sends `pending`, then follows `live` (if anything can follow).
pub(super) fn open<K: Kind>(
    pending: VecDeque<K::Item>,
    live: Option<Live<K>>,
    permit: StreamPermit,
) -> Feed<K::Item> {
    let follow = Follow {
        pending,
        live,
        _permit: permit,
    };
    Feed {
        backlog: follow.pending.len(),
        stream: futures::stream::unfold(follow, |mut follow| async move {
            loop {
                if let Some(item) = follow.pending.pop_front() {
                    return Some((item, follow));
                }
                // An idle stream should not keep the catch-up's buffer.
                if follow.pending.capacity() > 8 {
                    follow.pending = VecDeque::new();
                }
                let live = follow.live.as_mut()?;
                if !live.next(&mut follow.pending).await {
                    follow.live = None;
                }
            }
        })
        .boxed(),
    }
}
