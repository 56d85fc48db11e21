//! The one `LISTEN` connection of a replica: reconnects with back-off, reads `id:seq`
//! positions off the match and notice channels for the fan-out, and applies (and
//! acknowledges) token revocations. Every notification is a hint, never a value: any role
//! that can connect may `NOTIFY`. A position makes the fan-out read the database (a forged
//! one costs a read and at worst drops a kept state); a token notification makes the
//! revocation cache re-read the player's row; an acknowledgement only shortens the
//! revoking request's bounded wait. While it is down the revocation cache is bypassed,
//! and after every (re)connection the sweep re-reads every followed position, since
//! notifications sent meanwhile are gone.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use uuid::Uuid;

use super::feed::{self, Topic};
use super::{Inner, Matches, Players};
use crate::accounts::{APPLIED_CHANNEL, TOKENS_CHANNEL};
use crate::store;

/// `application_name` of the listening connection, so operators can find (or kill) it.
pub const LISTENER_APPLICATION_NAME: &str = "statki-live";

/// Longest wait between two attempts to re-establish the listening connection.
const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(2);

async fn connect_listener(options: &PgConnectOptions) -> Result<PgListener, sqlx::Error> {
    // A pool of one of its own: the listener must never wait behind commands for a
    // connection, and must not hold one of theirs.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options.clone())
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.ignore_pool_close_event(true);
    listener
        .listen_all([
            Matches::CHANNEL,
            Players::CHANNEL,
            TOKENS_CHANNEL,
            APPLIED_CHANNEL,
            store::streams::PRESENCE_CHANNEL,
        ])
        .await?;
    Ok(listener)
}

/// The listening loop: reconnects for ever, and after every (re)connection has the sweep
/// re-read every followed position, since notifications sent while not listening are gone.
pub(super) async fn listen(inner: Arc<Inner>) {
    let options = inner
        .pool
        .connect_options()
        .as_ref()
        .clone()
        .application_name(LISTENER_APPLICATION_NAME);
    let mut backoff = Duration::from_millis(50);
    let mut connected_before = false;
    loop {
        let mut listener = match connect_listener(&options).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "live: cannot listen; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_RECONNECT_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        if connected_before {
            metrics::counter!("statki_live_listener_reconnects_total").increment(1);
            tracing::info!("live: listening again; catching up");
        }
        connected_before = true;
        inner.listening.store(true, Ordering::Relaxed);
        inner.revocations.listening(true);
        inner.sweep_now.notify_one();
        loop {
            // `try_recv` runs alone, never inside a `select!`: it is not cancel-safe.
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    on_notification(&inner, notification.channel(), notification.payload());
                }
                Ok(None) => {
                    // sqlx re-established the connection and re-subscribed by itself.
                    metrics::counter!("statki_live_listener_reconnects_total").increment(1);
                    inner.revocations.listening(true);
                    inner.sweep_now.notify_one();
                }
                Err(error) => {
                    tracing::warn!(%error, "live: listening connection lost; reconnecting");
                    break;
                }
            }
        }
        inner.listening.store(false, Ordering::Relaxed);
        inner.revocations.listening(false);
        drop(listener);
    }
}

fn parse_position(payload: &str) -> Option<(Uuid, i64)> {
    let (id, seq) = payload.split_once(':')?;
    Some((id.parse().ok()?, seq.parse().ok()?))
}

/// A notification names one position, or several separated by commas (a batch commit
/// announces all its matches at once).
fn on_notification(inner: &Arc<Inner>, channel: &str, payload: &str) {
    for position in payload.split(',') {
        on_position(inner, channel, position);
    }
}

fn on_position(inner: &Arc<Inner>, channel: &str, payload: &str) {
    if channel == store::streams::PRESENCE_CHANNEL {
        match payload.parse::<Uuid>() {
            Ok(player) => feed::presence_changed(inner, player),
            Err(_) => tracing::warn!(channel, payload, "live: unreadable notification"),
        }
        return;
    }
    if channel == TOKENS_CHANNEL {
        // Only the player is taken from the payload; the instant is read from the row.
        let player = payload
            .split(':')
            .next()
            .and_then(|id| id.parse::<Uuid>().ok());
        let Some(player) = player else {
            tracing::warn!(channel, payload, "live: unreadable notification");
            return;
        };
        let inner = inner.clone();
        tokio::spawn(async move {
            let valid_from = match inner.revocations.reread(player).await {
                Ok(Some(valid_from)) => valid_from,
                Ok(None) => return,
                Err(error) => {
                    // Not trusted any more: the next request reads the row itself.
                    tracing::warn!(%error, "live: cannot re-read a player's tokens");
                    inner.revocations.forget(player);
                    return;
                }
            };
            let payload = format!("{player}:{valid_from}");
            let acknowledged =
                store::accounts::notify(&inner.pool, APPLIED_CHANNEL, &payload).await;
            if let Err(error) = acknowledged {
                tracing::warn!(%error, "live: cannot acknowledge a token revocation");
            }
        });
        return;
    }
    let Some((id, seq)) = parse_position(payload) else {
        tracing::warn!(channel, payload, "live: unreadable notification");
        return;
    };
    if channel == APPLIED_CHANNEL {
        inner.revocations.acknowledged(id, seq);
    } else if channel == Matches::CHANNEL {
        if let Ok(watchers) = inner.position_watchers.read() {
            for watcher in watchers.iter() {
                watcher(id, seq);
            }
        }
        feed::announce(inner, &inner.matches, id, seq);
    } else if channel == Players::CHANNEL {
        feed::announce(inner, &inner.players, id, seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse() {
        let id = Uuid::now_v7();
        assert_eq!(parse_position(&format!("{id}:42")), Some((id, 42)));
        assert_eq!(parse_position("nonsense"), None);
        assert_eq!(parse_position(&format!("{id}:x")), None);
    }
}
