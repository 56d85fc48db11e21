//! Matches: creating them and the players' commands (what a caller may read of them is in
//! [`super::reads`]).

use uuid::Uuid;

use super::commands::{AnswerKind, Reply};
use super::idempotency::{Answer, Idempotency, claim_or_replay, remember};
use super::resources::{MatchResource, NewMatch, ShotAnswer};
use super::write::{self, Change};
use super::{App, AppError, Result};
use crate::engine::{Cell, Command, HouseOptions, Match, MatchRules, RuleSetId};
use crate::store::{self, players};

/// Seconds a cancelled match still counts against its creator's cap of open matches, so
/// creating and withdrawing challenges in a loop cannot flood their target.
pub const WITHDRAWN_COOL_DOWN_SECONDS: i64 = 120;
/// Most direct challenges that may wait for one player at once, from everyone together.
pub const CHALLENGES_PER_TARGET: i64 = 20;

impl App {
    /// Resolves a lobby's request into the rules the match will be played by.
    pub fn resolve_rules(&self, request: &NewMatch) -> Result<MatchRules> {
        let ruleset = match request.ruleset.as_deref() {
            None => RuleSetId::Statki,
            Some(name) => {
                RuleSetId::parse(name).ok_or_else(|| AppError::UnknownRuleset(name.into()))?
            }
        };
        let options = request.options.unwrap_or_default();
        if request.ranked && options != HouseOptions::default() {
            return Err(AppError::RankedNeedsStandardRules(
                "house options make a match unranked",
            ));
        }
        let clock = match request.clock {
            Some(_) if request.ranked => {
                return Err(AppError::RankedNeedsStandardRules(
                    "a ranked match always uses the standard clock",
                ));
            }
            Some(clock) => clock.validate()?,
            None => self.settings().standard_clock,
        };
        Ok(MatchRules::new(
            ruleset,
            options,
            clock,
            self.settings().join_seconds,
        )?)
    }

    /// Creates a match with `creator` in the first seat.
    #[tracing::instrument(skip(self, request, idempotency))]
    pub async fn create_match(
        &self,
        creator: Uuid,
        request: &NewMatch,
        idempotency: Option<&Idempotency>,
    ) -> Result<Answer<MatchResource>> {
        let rules = self.resolve_rules(request)?;
        if let Some(opponent) = request.opponent {
            if players::get(self.pool(), opponent).await?.is_none() {
                return Err(AppError::NotFound("opponent"));
            }
            if request.ranked && self.is_bot(opponent).await? {
                return Err(AppError::RankedAgainstBot);
            }
        }
        let mut tx = self.begin().await?;
        if let Some(answer) = claim_or_replay(&mut tx, creator, idempotency).await? {
            return Ok(Answer::Replayed(answer));
        }
        let limit = self.settings().open_matches_per_player;
        let (open, challenges) = store::matches::count_open_locked(
            &mut tx,
            creator,
            request.opponent,
            WITHDRAWN_COOL_DOWN_SECONDS,
        )
        .await?;
        if open >= i64::from(limit) {
            return Err(AppError::TooManyOpenMatches(limit));
        }
        if challenges >= CHALLENGES_PER_TARGET {
            return Err(AppError::TooManyChallenges(CHALLENGES_PER_TARGET));
        }
        let now = store::now(&mut *tx).await?;
        let created = Match::create(creator, rules, request.ranked, request.opponent, now)?;
        let change = Change::new_match(Uuid::now_v7(), vec![created], now)?;
        let kind = self.kind(&mut tx).await?;
        let folded = write::apply(&mut tx, kind, vec![change], now).await?;
        let change = folded
            .first()
            .ok_or_else(|| AppError::Corrupt("no match created".into()))?;
        let resource =
            MatchResource::render(change.id, &change.state, change.last_seq, now, creator, now);
        remember(&mut tx, creator, idempotency, &resource).await?;
        tx.commit().await?;
        Ok(Answer::Fresh(resource))
    }

    /// Runs `actor`'s command on a match and answers with the actor's view after it.
    #[tracing::instrument(skip(self, command, idempotency))]
    pub async fn command(
        &self,
        match_id: Uuid,
        actor: Uuid,
        command: Command,
        idempotency: Option<Idempotency>,
    ) -> Result<Answer<MatchResource>> {
        let answer = self
            .inner
            .committer
            .submit(match_id, actor, command, idempotency, AnswerKind::View)
            .await?;
        Ok(match answer {
            Answer::Fresh(Reply::View(view)) => Answer::Fresh(*view),
            Answer::Fresh(Reply::Shot(_)) => {
                return Err(AppError::Corrupt("a view was asked for".into()));
            }
            Answer::Replayed(stored) => Answer::Replayed(stored),
        })
    }

    /// `actor` fires at `cell` of the opponent's sea.
    #[tracing::instrument(skip(self, idempotency))]
    pub async fn fire(
        &self,
        match_id: Uuid,
        actor: Uuid,
        cell: Cell,
        idempotency: Option<Idempotency>,
    ) -> Result<Answer<ShotAnswer>> {
        let answer = self
            .inner
            .committer
            .submit(
                match_id,
                actor,
                Command::Fire { cell },
                idempotency,
                AnswerKind::Shot,
            )
            .await?;
        Ok(match answer {
            Answer::Fresh(Reply::Shot(shot)) => Answer::Fresh(*shot),
            Answer::Fresh(Reply::View(_)) => {
                return Err(AppError::Corrupt("a shot answer was asked for".into()));
            }
            Answer::Replayed(stored) => Answer::Replayed(stored),
        })
    }
}
