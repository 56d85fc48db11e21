//! The bot worker: every replica runs one, and together they play every bot's moves.
//!
//! Pending bot work is read from the match rows themselves (a bot invited to a waiting
//! match, a bot seat with an unlocked fleet in placement, a bot on turn in battle), so it
//! is durable by construction: a restarted or replacement replica picks up where another
//! stopped. Each [`Worker::tick`] claims such matches with `FOR UPDATE SKIP LOCKED`, like
//! the clock claims due deadlines, so replicas share the work without a leader and never
//! act on one match twice; the bot decides from its own [`crate::engine::MatchView`], and
//! its command goes through the same write path as a player's ([`crate::service`]'s
//! `command_locked`), in the claiming transaction.
//!
//! A bot waits `STATKI_BOT_DELAY_MS` after a match last changed before acting (joining and
//! placing wait at most [`SETUP_DELAY_CAP`], so a bot is seated and ready within 2 s), and
//! acts at once when its clock would otherwise run out within [`CLOCK_MARGIN`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::watch;

use super::{Level, next_command};
use crate::engine::{Command, Phase, Viewer};
use crate::matchmaking;
use crate::service::{Applied, Result, Service, command_locked};
use crate::store::{self, bots};

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

/// Plays the bots' moves through a [`Service`].
#[derive(Clone)]
pub struct Worker {
    service: Service,
    delay: chrono::Duration,
}

impl Worker {
    /// A worker whose bots pause `delay` before each action.
    pub fn new(service: Service, delay: Duration) -> Self {
        Self {
            service,
            delay: chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX),
        }
    }

    /// Plays every bot action due at `now`: batch after batch of claimed matches, then the
    /// rematch offers waiting for a bot. Tests drive the worker with it.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<Tick> {
        let mut done = Tick::default();
        loop {
            let (claimed, moves) = self.batch(now).await?;
            done.moves += moves;
            if claimed < BATCH as usize {
                break;
            }
        }
        done.rematches = self.answer_rematches(now).await?;
        if done.moves > 0 {
            metrics::counter!("statki_bot_moves_total").increment(done.moves as u64);
        }
        Ok(done)
    }

    /// One transaction: claims up to [`BATCH`] matches waiting for a bot, decides each from
    /// the bot's view and runs it through the command write path. Returns how many were
    /// claimed and how many moves were made.
    async fn batch(&self, now: DateTime<Utc>) -> Result<(usize, usize)> {
        let mut tx = self.service.pool.begin().await?;
        // Joining and placing wait at most the setup cap; a shot waits the whole delay.
        let claimed = bots::claim_turns(
            &mut *tx,
            now - self.delay,
            now - self.delay.min(SETUP_DELAY_CAP),
            now + CLOCK_MARGIN,
            BATCH,
        )
        .await?;
        let count = claimed.len();
        let mut moves = 0;
        let mut rng = StdRng::from_rng(&mut rand::rng());
        for turn in claimed {
            let (row, level) = match (turn.row, turn.level) {
                (Ok(row), Ok(level)) => (row, level),
                (Err(error), _) | (_, Err(error)) => {
                    tracing::error!(match_id = %turn.id, %error, "a bot's match is unreadable");
                    continue;
                }
            };
            let Some(command) = decide(&row.state, turn.bot, level, &mut rng) else {
                continue;
            };
            match command_locked(&mut tx, row, turn.bot, &command, now).await {
                Ok(Applied::Done(..)) => moves += 1,
                Ok(Applied::ClockRanOut(_)) => {}
                Err(crate::service::ServiceError::Rule(refusal)) => {
                    // Nothing was written; the match's clock settles it if this persists.
                    tracing::error!(match_id = %turn.id, bot = %turn.bot, %refusal,
                        "the engine refused a bot's command");
                }
                Err(error) => return Err(error),
            }
        }
        tx.commit().await?;
        Ok((count, moves))
    }

    /// Accepts every rematch a human offered a bot (after the bot's pause). Starting a
    /// rematch is recorded once per match, so two replicas answering together start one.
    async fn answer_rematches(&self, now: DateTime<Utc>) -> Result<usize> {
        let offers = bots::rematch_offers(&self.service.pool, now, now - self.delay, BATCH).await?;
        let mut answered = 0;
        for (match_id, bot) in offers {
            match matchmaking::ask_rematch(&self.service, match_id, bot).await {
                Ok(_) => answered += 1,
                Err(error) => {
                    tracing::warn!(%match_id, %bot, %error, "a bot could not answer a rematch");
                }
            }
        }
        Ok(answered)
    }
}

/// The bot's command for a match, decided from its own view only.
fn decide(
    state: &crate::engine::Match,
    bot: uuid::Uuid,
    level: Level,
    rng: &mut StdRng,
) -> Option<Command> {
    if state.phase == Phase::Waiting {
        return (state.invited == Some(bot)).then_some(Command::Join);
    }
    next_command(level, &state.view(Viewer::Player(bot)), rng)
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
    let now = store::now(&worker.service.pool).await?;
    worker.tick(now).await
}
