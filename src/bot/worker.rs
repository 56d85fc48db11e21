//! The bot worker: every replica runs one, and together they play every bot's moves.
//!
//! Pending bot work (a bot invited to a waiting match, a bot seat with an unlocked fleet in
//! placement, a bot on turn in battle) is queued in `bot_turns` by the write path in the
//! statement that writes the match row, so it is durable by construction and a poll reads
//! only what is due: a restarted or replacement replica picks up where another
//! stopped. Each [`Worker::tick`] claims such matches with `FOR UPDATE SKIP LOCKED`, like
//! the clock claims due deadlines, so replicas share the work without a leader and never
//! act on one match twice; the bot decides from its own [`crate::engine::MatchView`], the
//! engine judges its command like a player's, and the change goes through the one write path
//! (`App::play_bots`), in the claiming transaction.
//!
//! A bot waits `STATKI_BOT_DELAY_MS` after a match last changed before acting (joining and
//! placing wait at most [`SETUP_DELAY_CAP`], so a bot is seated and ready within 2 s), and
//! acts at once when its clock would otherwise run out within [`CLOCK_MARGIN`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::app::{App, BotWindow, Result, matchmaking};

/// Matches claimed per transaction.
pub const BATCH: i64 = 16;
/// How often an idle worker looks for bot work.
pub const POLL: Duration = Duration::from_millis(100);
/// The longest a bot waits before joining or placing, whatever the configured delay.
pub const SETUP_DELAY_CAP: chrono::Duration = chrono::Duration::milliseconds(500);
/// A bot whose clock runs out sooner than this acts without waiting.
pub const CLOCK_MARGIN: chrono::Duration = chrono::Duration::seconds(1);

/// What one tick did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tick {
    /// Bot commands the engine accepted.
    pub moves: usize,
    /// Rematch offers the bots answered.
    pub rematches: usize,
}

/// Plays the bots' moves through an [`App`].
#[derive(Clone)]
pub struct Worker {
    app: App,
    delay: chrono::Duration,
}

impl Worker {
    /// A worker whose bots pause `delay` before each action.
    pub fn new(app: App, delay: Duration) -> Self {
        Self {
            app,
            delay: chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX),
        }
    }

    /// Plays every bot action due at `now`: batch after batch of claimed matches, then the
    /// rematch offers waiting for a bot. Tests drive the worker with it.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<Tick> {
        // Joining and placing wait at most the setup cap; a shot waits the whole delay.
        let window = BotWindow {
            settled: now - self.delay,
            setup_settled: now - self.delay.min(SETUP_DELAY_CAP),
            urgent: now + CLOCK_MARGIN,
        };
        let mut done = Tick::default();
        loop {
            let batch = self.app.play_bots(window, now, BATCH).await?;
            done.moves += batch.moves;
            if batch.claimed < BATCH as usize {
                break;
            }
        }
        done.rematches = self.answer_rematches(now).await?;
        if done.moves > 0 {
            metrics::counter!("statki_bot_moves_total").increment(done.moves as u64);
        }
        Ok(done)
    }

    /// Accepts every rematch a human offered a bot (after the bot's pause). Starting a
    /// rematch is recorded once per match, so two replicas answering together start one.
    async fn answer_rematches(&self, now: DateTime<Utc>) -> Result<usize> {
        let offers = self
            .app
            .bot_rematch_offers(now, now - self.delay, BATCH)
            .await?;
        let mut answered = 0;
        for (match_id, bot) in offers {
            match matchmaking::ask_rematch(&self.app, match_id, bot, None).await {
                Ok(_) => answered += 1,
                Err(error) => {
                    tracing::warn!(%match_id, %bot, %error, "a bot could not answer a rematch");
                }
            }
        }
        Ok(answered)
    }
}

/// The worker of one replica, until `stop` turns true: ticks at the database's time every
/// [`POLL`] (at once again after a tick that moved).
pub async fn run(worker: Worker, mut stop: watch::Receiver<bool>) {
    tracing::info!(
        delay_ms = worker.delay.num_milliseconds(),
        "bot worker started"
    );
    loop {
        let wait = match tick_now(&worker).await {
            Ok(tick) if tick.moves > 0 => Duration::ZERO,
            Ok(_) => POLL,
            Err(error) => {
                tracing::error!(%error, "bot worker tick failed");
                Duration::from_secs(1)
            }
        };
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

async fn tick_now(worker: &Worker) -> Result<Tick> {
    let now = worker.app.db_now().await?;
    worker.tick(now).await
}
