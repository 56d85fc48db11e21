//! Matches: creating them, the players' commands, and what a caller may read of them.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::commands::{AnswerKind, Reply};
use super::idempotency::{Answer, Idempotency, claim_or_replay, remember};
use super::resources::{EventResource, MatchResource, NewMatch, ShotAnswer, viewer_of};
use super::write::{self, Change};
use super::{App, AppError, EVENTS_PAGE, LIST_PAGE, Result};
use crate::engine::{Cell, Command, HouseOptions, Match, MatchRules, RuleSetId};
use crate::store::{self, matches, players};

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
        if let Some(opponent) = request.opponent
            && players::get(self.pool(), opponent).await?.is_none()
        {
            return Err(AppError::NotFound("opponent"));
        }
        let mut tx = self.pool().begin().await?;
        if let Some(answer) = claim_or_replay(&mut tx, creator, idempotency).await? {
            return Ok(Answer::Replayed(answer));
        }
        let now = store::now(&mut *tx).await?;
        let created = Match::create(creator, rules, request.ranked, request.opponent, now)?;
        let change = Change::new_match(Uuid::now_v7(), vec![created])?;
        let folded = write::apply(&mut tx, vec![change], now).await?;
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

    #[tracing::instrument(skip(self))]
    pub async fn view(&self, id: Uuid, viewer: Uuid) -> Result<MatchResource> {
        let row = matches::get(self.pool(), id)
            .await?
            .ok_or(AppError::NotFound("match"))?;
        let now = self.now().await?;
        Ok(MatchResource::render(
            id,
            &row.state,
            row.last_seq,
            row.created_at,
            viewer,
            now,
        ))
    }

    /// The events after `after` that `viewer` may see, redacted.
    #[tracing::instrument(skip(self))]
    pub async fn events(&self, id: Uuid, viewer: Uuid, after: i64) -> Result<Vec<EventResource>> {
        let row = matches::get(self.pool(), id)
            .await?
            .ok_or(AppError::NotFound("match"))?;
        let events = store::events::list(self.pool(), id, after, EVENTS_PAGE).await?;
        let who = viewer_of(&row.state, viewer);
        Ok(events
            .into_iter()
            .map(|stored| EventResource {
                seq: stored.seq,
                at: stored.at,
                event: row.state.redact(&stored.event, who),
            })
            .collect())
    }

    #[tracing::instrument(skip(self))]
    pub async fn open_matches(&self, viewer: Uuid) -> Result<Vec<MatchResource>> {
        let rows = matches::list_open(self.pool(), viewer, LIST_PAGE).await?;
        self.render_all(rows, viewer).await
    }

    #[tracing::instrument(skip(self))]
    pub async fn player_matches(
        &self,
        player: Uuid,
        viewer: Uuid,
        before: Option<DateTime<Utc>>,
    ) -> Result<Vec<MatchResource>> {
        players::get(self.pool(), player)
            .await?
            .ok_or(AppError::NotFound("player"))?;
        let rows = matches::list_for_player(self.pool(), player, before, LIST_PAGE).await?;
        self.render_all(rows, viewer).await
    }

    async fn render_all(
        &self,
        rows: Vec<matches::MatchRow>,
        viewer: Uuid,
    ) -> Result<Vec<MatchResource>> {
        let now = self.now().await?;
        Ok(rows
            .iter()
            .map(|row| {
                MatchResource::render(
                    row.id,
                    &row.state,
                    row.last_seq,
                    row.created_at,
                    viewer,
                    now,
                )
            })
            .collect())
    }
}
