//! Bots as a use case: listing them, and playing the moves waiting for them. Each bot move
//! is judged by the engine like a player's command (a clock that ran out first is enforced
//! instead) and stored through the one write path, in the transaction that claimed it.
//! `crate::bot::worker` decides when this runs.

use chrono::{DateTime, Utc};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::write::{self, Judged};
use super::{App, Result};
use crate::bot::{Level, next_command};
use crate::engine::{Command, Match, Phase, Viewer};
use crate::store::bots;

/// A bot opponent as `GET /v1/bots` lists it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct BotProfile {
    /// The bot's player id: challenge it with `opponent` set to this.
    pub id: Uuid,
    pub name: String,
    pub level: Level,
    /// One line on how it plays.
    pub description: String,
}

/// When a bot may act: its pauses, as cut-off times for the match's last change.
#[derive(Clone, Copy, Debug)]
pub struct BotWindow {
    /// A shot is due once the match has been still since this.
    pub settled: DateTime<Utc>,
    /// Joining and placing are due once the match has been still since this.
    pub setup_settled: DateTime<Utc>,
    /// A bot whose clock runs out before this acts at once.
    pub urgent: DateTime<Utc>,
}

/// What one claimed batch of bot work came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BotBatch {
    pub claimed: usize,
    pub moves: usize,
}

/// The bot's command for a match, decided from its own view only.
fn bot_command(state: &Match, bot: Uuid, level: Level, rng: &mut StdRng) -> Option<Command> {
    if state.phase == Phase::Waiting {
        return (state.invited == Some(bot)).then_some(Command::Join);
    }
    next_command(level, &state.view(Viewer::Player(bot)), rng)
}

impl App {
    /// The bot opponents, easiest first.
    pub async fn bots(&self) -> Result<Vec<BotProfile>> {
        let rows = bots::list(self.pool()).await?;
        Ok(rows
            .into_iter()
            .map(|row| BotProfile {
                id: row.id,
                name: row.name,
                level: row.level,
                description: row.description,
            })
            .collect())
    }

    /// Whether `player` is a bot.
    pub async fn is_bot(&self, player: Uuid) -> Result<bool> {
        Ok(bots::level_of(self.pool(), player).await?.is_some())
    }

    /// One transaction: claims up to `limit` matches waiting for a bot (`SKIP LOCKED`, so
    /// replicas share them and none is handled twice), decides each bot's command from its
    /// view, and stores the accepted ones through the write path.
    #[tracing::instrument(skip(self))]
    pub async fn play_bots(
        &self,
        window: BotWindow,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<BotBatch> {
        let mut tx = self.begin().await?;
        let kind = self.kind(&mut tx).await?;
        let claimed = bots::claim_turns(
            &mut tx,
            kind,
            window.settled,
            window.setup_settled,
            window.urgent,
            limit,
        )
        .await?;
        let count = claimed.len();
        let mut rng = StdRng::from_rng(&mut rand::rng());
        let mut changes = Vec::with_capacity(count);
        let mut moves = 0;
        for turn in claimed {
            let (row, level) = match (turn.row, turn.level) {
                (Ok(row), Ok(level)) => (row, level),
                (Err(error), _) | (_, Err(error)) => {
                    tracing::error!(match_id = %turn.id, %error, "a bot's match is unreadable");
                    continue;
                }
            };
            let Some(command) = bot_command(&row.state, turn.bot, level, &mut rng) else {
                continue;
            };
            match write::judge(row, turn.bot, &command, now) {
                Judged::Accepted(change) => {
                    moves += 1;
                    changes.push(change);
                }
                // The clock ran out first: enforce it, as a player's command would (and,
                // as there, not before the clock gave back an outage).
                Judged::Expired(expiry, _) => {
                    if super::clocks::may_enforce(&mut tx, now).await? {
                        changes.push(expiry);
                    }
                }
                Judged::Refused(refusal) => {
                    // Nothing is written; the match's clock settles it if this persists.
                    tracing::error!(match_id = %turn.id, bot = %turn.bot, %refusal,
                        "the engine refused a bot's command");
                }
            }
        }
        if !changes.is_empty() {
            write::apply(&mut tx, kind, changes, now).await?;
        }
        tx.commit().await?;
        Ok(BotBatch {
            claimed: count,
            moves,
        })
    }

    /// Finished bot matches whose human opponent offered a rematch before `settled`, with
    /// the bot to answer it.
    pub async fn bot_rematch_offers(
        &self,
        now: DateTime<Utc>,
        settled: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(Uuid, Uuid)>> {
        Ok(bots::rematch_offers(self.pool(), now, settled, limit).await?)
    }

    /// The database's time.
    pub async fn db_now(&self) -> Result<DateTime<Utc>> {
        self.now().await
    }
}
