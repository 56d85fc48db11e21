//! One function per command: lock the match, run the engine, append the events, update the
//! row, commit, notify. The service never decides a rule itself.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{TokenError, Tokens};
use crate::engine::{
    Clock, Command, Draw, Event, HouseOptions, Match, MatchRules, MatchView, Outcome, Phase,
    Refusal, RuleSetId, SunkShip, Viewer,
};
use crate::names::PlayerName;
use crate::store::{self, StoreError, StoredEvent, idempotency, matches, players};

/// The notification channel every commit announces `match_id:seq` on.
pub const EVENTS_CHANNEL: &str = "statki_events";
/// Most events one page of a feed returns.
pub const EVENTS_PAGE: i64 = 500;
/// Most matches one list returns.
pub const LIST_PAGE: i64 = 100;

/// What one batch of the clock came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expired {
    /// Due matches claimed (locked) by the batch.
    pub claimed: usize,
    /// Of those, how many were expired.
    pub expired: usize,
}

/// The clocks and limits an operator sets.
#[derive(Clone, Copy, Debug)]
pub struct GameSettings {
    pub standard_clock: Clock,
    pub join_seconds: u32,
    /// Most unjoined matches one player may hold, so nobody can fill the open list.
    pub open_matches_per_player: u32,
}

/// Why a request was not carried out. Carries no transport detail: `http` maps each kind
/// to a status.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Rule(#[from] Refusal),
    #[error("no {0} with that id")]
    NotFound(&'static str),
    #[error("the name `{0}` is taken")]
    NameTaken(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("unknown rule set `{0}`: use statki, classic or battaglia")]
    UnknownRuleset(String),
    #[error("ranked matches use the preset's standard rules and clock: {0}")]
    RankedNeedsStandardRules(&'static str),
    #[error("you already have {0} matches waiting for an opponent; cancel or wait for one")]
    TooManyOpenMatches(u32),
    #[error("this Idempotency-Key was used for a different request")]
    IdempotencyMismatch,
    #[error("a request with this Idempotency-Key is still being processed")]
    IdempotencyInProgress,
    #[error("{0}")]
    Token(#[from] TokenError),
    #[error("the player in the token does not exist")]
    UnknownPlayer,
    #[error("stored state is unreadable: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NameTaken => ServiceError::NameTaken(String::new()),
            StoreError::UnknownPlayer => ServiceError::UnknownPlayer,
            StoreError::Corrupt(detail) => ServiceError::Corrupt(detail),
            StoreError::Database(error) => ServiceError::Database(error),
        }
    }
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

/// An `Idempotency-Key` and a digest of the request it was first used with.
#[derive(Clone, Debug)]
pub struct Idempotency {
    pub key: String,
    pub request_hash: String,
}

/// A registered player with a fresh token.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PlayerCreated {
    pub id: Uuid,
    pub name: String,
    pub token: String,
}

/// A player's public profile.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PlayerProfile {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// Over every finished match, ranked or not.
    pub wins: i64,
    pub losses: i64,
    pub draws: i64,
    /// Rating and record on each ranked ladder.
    pub ladders: Vec<crate::ladder::LadderStanding>,
}

/// What a lobby asks for when creating a match.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMatch {
    /// `statki` (default), `classic` or `battaglia`.
    #[serde(default)]
    pub ruleset: Option<String>,
    #[serde(default)]
    pub ranked: bool,
    #[serde(default)]
    pub options: Option<HouseOptions>,
    /// Unranked only: own clocks within bounds (placement 5–600 s, shot 2–120 s).
    #[serde(default)]
    pub clock: Option<Clock>,
    /// A direct challenge: only this player may join.
    #[serde(default)]
    pub opponent: Option<Uuid>,
}

/// A match as one caller sees it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MatchResource {
    pub id: Uuid,
    pub ruleset: RuleSetId,
    /// Sequence number of the latest event.
    pub seq: i64,
    pub created_at: DateTime<Utc>,
    /// Milliseconds until `deadline`, by the server's clock.
    pub deadline_ms_left: Option<i64>,
    #[serde(flatten)]
    pub view: MatchView,
}

/// The answer to a shot.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ShotAnswer {
    #[schema(value_type = String)]
    pub cell: crate::engine::Cell,
    pub outcome: Outcome,
    pub sunk_ship: Option<SunkShip>,
    /// Cells now known to be empty around a sunk ship.
    #[schema(value_type = Vec<String>)]
    pub marked: Vec<crate::engine::Cell>,
    pub next_turn: Option<Uuid>,
    pub deadline: Option<DateTime<Utc>>,
    pub deadline_ms_left: Option<i64>,
    pub phase: Phase,
    pub result: Option<crate::engine::MatchResult>,
    pub seq: i64,
}

/// One event of a match's feed, redacted for the caller.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct EventResource {
    pub seq: i64,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
}

/// A command's result, as its answer is rendered from.
pub struct Committed<'a> {
    pub id: Uuid,
    pub state: &'a Match,
    pub stored: &'a [StoredEvent],
    pub seq: i64,
    pub created_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

impl Committed<'_> {
    /// The match as `viewer` sees it after the command.
    pub fn resource(&self, viewer: Uuid) -> MatchResource {
        render(
            self.id,
            self.state,
            self.seq,
            self.created_at,
            viewer,
            self.now,
        )
    }
}

/// The command layer over the store and the engine.
#[derive(Clone)]
pub struct Service {
    pub pool: PgPool,
    pub settings: GameSettings,
    pub tokens: Tokens,
}

fn ms_left(deadline: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<i64> {
    deadline.map(|deadline| (deadline - now).num_milliseconds().max(0))
}

fn draw() -> Draw {
    Draw {
        coin: rand::random(),
        salt: rand::random(),
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| ServiceError::Corrupt(e.to_string()))
}

impl Service {
    pub fn new(pool: PgPool, settings: GameSettings, tokens: Tokens) -> Self {
        Self {
            pool,
            settings,
            tokens,
        }
    }

    /// The database's time: the only clock.
    async fn now(&self) -> Result<DateTime<Utc>> {
        Ok(store::now(&self.pool).await?)
    }

    pub async fn register(&self, name: &str) -> Result<PlayerCreated> {
        let name = PlayerName::parse(name).map_err(|e| ServiceError::InvalidName(e.to_string()))?;
        let id = Uuid::now_v7();
        let row = players::insert(&self.pool, id, &name)
            .await
            .map_err(|e| match e {
                StoreError::NameTaken => ServiceError::NameTaken(name.to_string()),
                other => other.into(),
            })?;
        let token = self.tokens.mint(id, row.created_at)?;
        Ok(PlayerCreated {
            id,
            name: row.name,
            token,
        })
    }

    pub async fn profile(&self, id: Uuid) -> Result<PlayerProfile> {
        let row = players::get(&self.pool, id)
            .await?
            .ok_or(ServiceError::NotFound("player"))?;
        let (wins, losses, draws) = players::record(&self.pool, id).await?;
        let ladders = crate::ladder::standings(&self.pool, id).await?;
        Ok(PlayerProfile {
            id,
            name: row.name,
            created_at: row.created_at,
            wins,
            losses,
            draws,
            ladders,
        })
    }

    /// Resolves a lobby's request into the rules the match will be played by.
    pub fn resolve_rules(&self, request: &NewMatch) -> Result<MatchRules> {
        let ruleset = match request.ruleset.as_deref() {
            None => RuleSetId::Statki,
            Some(name) => {
                RuleSetId::parse(name).ok_or_else(|| ServiceError::UnknownRuleset(name.into()))?
            }
        };
        let options = request.options.unwrap_or_default();
        if request.ranked && options != HouseOptions::default() {
            return Err(ServiceError::RankedNeedsStandardRules(
                "house options make a match unranked",
            ));
        }
        let clock = match request.clock {
            Some(_) if request.ranked => {
                return Err(ServiceError::RankedNeedsStandardRules(
                    "a ranked match always uses the standard clock",
                ));
            }
            Some(clock) => clock.validate()?,
            None => self.settings.standard_clock,
        };
        Ok(MatchRules::new(
            ruleset,
            options,
            clock,
            self.settings.join_seconds,
        )?)
    }

    pub async fn create_match(
        &self,
        creator: Uuid,
        request: &NewMatch,
        idempotency: Option<&Idempotency>,
    ) -> Result<Value> {
        let rules = self.resolve_rules(request)?;
        if let Some(opponent) = request.opponent
            && players::get(&self.pool, opponent).await?.is_none()
        {
            return Err(ServiceError::NotFound("opponent"));
        }
        let mut tx = self.pool.begin().await?;
        if let Some(answer) = claim_or_replay(&mut tx, creator, idempotency).await? {
            return Ok(answer);
        }
        let limit = self.settings.open_matches_per_player;
        if matches::count_waiting_locked(&mut tx, creator).await? >= i64::from(limit) {
            return Err(ServiceError::TooManyOpenMatches(limit));
        }
        let now = store::now(&mut *tx).await?;
        let created = Match::create(creator, rules, request.ranked, request.opponent, now)?;
        let state = Match::fold([&created]).map_err(|e| ServiceError::Corrupt(e.to_string()))?;
        let id = Uuid::now_v7();
        matches::insert(&mut *tx, id, &state, now).await?;
        let stored =
            matches::record(&mut *tx, id, 0, now, &[created], &state, EVENTS_CHANNEL).await?;
        let resource = render(id, &state, 1, now, creator, now);
        let response = to_json(&resource)?;
        remember(&mut tx, creator, idempotency, &response).await?;
        announce(&mut tx, id, &state, &stored).await?;
        tx.commit().await?;
        Ok(response)
    }

    /// Runs one player command on a match as one transaction and renders the answer with
    /// `respond` (which sees the new state and the stored events).
    pub async fn command<R: Serialize>(
        &self,
        match_id: Uuid,
        actor: Uuid,
        command: Command,
        idempotency: Option<&Idempotency>,
        respond: impl FnOnce(&Committed<'_>) -> R,
    ) -> Result<Value> {
        let mut tx = self.pool.begin().await?;
        if let Some(answer) = claim_or_replay(&mut tx, actor, idempotency).await? {
            return Ok(answer);
        }
        let (row, now) = matches::lock(&mut *tx, match_id)
            .await?
            .ok_or(ServiceError::NotFound("match"))?;
        if let Ok(expiry) = row.state.expire(now) {
            // The clock ran out before this command arrived, and the clock task has not
            // enforced it yet: enforce it now, then judge the command by the ended match.
            let (expired, stored) = append_events(&mut tx, row, &expiry, now).await?;
            announce(&mut tx, match_id, &expired, &stored).await?;
            if let Some(key) = idempotency {
                idempotency::release(&mut *tx, actor, &key.key).await?;
            }
            tx.commit().await?;
            let refusal = expired.decide(actor, &command, now, draw()).err();
            return Err(refusal.unwrap_or(Refusal::NotDue).into());
        }
        let events = row.state.decide(actor, &command, now, draw())?;
        let created_at = row.created_at;
        let (state, stored) = append_events(&mut tx, row, &events, now).await?;
        let committed = Committed {
            id: match_id,
            state: &state,
            stored: &stored,
            seq: stored.last().map_or(0, |event| event.seq),
            created_at,
            now,
        };
        let response = to_json(&respond(&committed))?;
        remember(&mut tx, actor, idempotency, &response).await?;
        announce(&mut tx, match_id, &state, &stored).await?;
        tx.commit().await?;
        metrics::counter!("statki_events_total").increment(stored.len() as u64);
        if matches!(command, Command::Fire { .. }) {
            metrics::counter!("statki_shots_total").increment(1);
        }
        Ok(response)
    }

    /// Applies the engine's expiry to every match whose clock ran out by `now`, in batches
    /// of `batch` rows claimed with `SKIP LOCKED`, so replicas share the work and never
    /// handle one match twice. Returns how many matches changed.
    pub async fn expire_due(&self, now: DateTime<Utc>, batch: i64) -> Result<usize> {
        let mut changed = 0;
        loop {
            let round = self.expire_batch(now, batch).await?;
            changed += round.expired;
            if round.expired == 0 || (round.claimed as i64) < batch {
                return Ok(changed);
            }
        }
    }

    /// One transaction of [`Service::expire_due`]: claims up to `limit` due matches and
    /// expires each that is still in the state that armed its deadline.
    pub async fn expire_batch(&self, now: DateTime<Utc>, limit: i64) -> Result<Expired> {
        let mut tx = self.pool.begin().await?;
        let due = matches::claim_due(&mut *tx, now, limit).await?;
        let claimed = due.len();
        let mut changes = Vec::with_capacity(claimed);
        for matches::Claimed { id, row } in due {
            let row = match row {
                Ok(row) => row,
                Err(error) => {
                    tracing::error!(
                        match_id = %id, %error,
                        "a due match is unreadable; its clock is not enforced"
                    );
                    continue;
                }
            };
            // The row is locked as it stands now, and the engine re-checks its deadline: a
            // command that moved the clock first wins, and nothing is enforced twice.
            if let Ok(events) = row.state.expire(now) {
                changes.push((row, events));
            }
        }
        let expired = changes.len();
        append_many(&mut tx, changes, now).await?;
        tx.commit().await?;
        Ok(Expired { claimed, expired })
    }

    /// Gives back `by` to every running clock whose deadline is after `since`: time lost
    /// while no replica was alive. A clock re-armed since it was listed (a command got in
    /// first) is fresh and left alone. Returns how many matches changed.
    pub async fn extend_clocks(
        &self,
        tx: &mut sqlx::PgConnection,
        since: DateTime<Utc>,
        by: chrono::Duration,
        now: DateTime<Utc>,
    ) -> Result<usize> {
        let listed = matches::with_deadline_after(&mut *tx, since).await?;
        let mut changed = 0;
        for (id, deadline) in listed {
            let Some((row, _)) = matches::lock(&mut *tx, id).await? else {
                continue;
            };
            if row.state.deadline != Some(deadline) {
                continue;
            }
            let Ok(events) = row.state.extend_clock(by) else {
                continue;
            };
            self.append_in(tx, row, &events, now).await?;
            changed += 1;
        }
        Ok(changed)
    }

    async fn append_in(
        &self,
        tx: &mut sqlx::PgConnection,
        row: matches::MatchRow,
        events: &[Event],
        now: DateTime<Utc>,
    ) -> Result<()> {
        let id = row.id;
        let (state, stored) = append_events(tx, row, events, now).await?;
        announce(tx, id, &state, &stored).await
    }

    pub async fn view(&self, id: Uuid, viewer: Uuid) -> Result<MatchResource> {
        let row = matches::get(&self.pool, id)
            .await?
            .ok_or(ServiceError::NotFound("match"))?;
        let now = self.now().await?;
        Ok(render(
            id,
            &row.state,
            row.last_seq,
            row.created_at,
            viewer,
            now,
        ))
    }

    /// The events after `after` that `viewer` may see, redacted.
    pub async fn events(&self, id: Uuid, viewer: Uuid, after: i64) -> Result<Vec<EventResource>> {
        let row = matches::get(&self.pool, id)
            .await?
            .ok_or(ServiceError::NotFound("match"))?;
        let events = store::events::list(&self.pool, id, after, EVENTS_PAGE).await?;
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

    pub async fn open_matches(&self, viewer: Uuid) -> Result<Vec<MatchResource>> {
        let rows = matches::list_open(&self.pool, viewer, LIST_PAGE).await?;
        self.render_all(rows, viewer).await
    }

    pub async fn player_matches(
        &self,
        player: Uuid,
        viewer: Uuid,
        before: Option<DateTime<Utc>>,
    ) -> Result<Vec<MatchResource>> {
        players::get(&self.pool, player)
            .await?
            .ok_or(ServiceError::NotFound("player"))?;
        let rows = matches::list_for_player(&self.pool, player, before, LIST_PAGE).await?;
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
                render(
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

/// Claims the request's idempotency key in `tx`. A key already used gives the first answer
/// (or why it cannot be given); the caller returns it and its transaction rolls back. The
/// claim waits for a concurrent claimant to commit, and each statement sees what committed
/// before it, so the stored answer is read on the same connection.
pub(crate) async fn claim_or_replay(
    tx: &mut sqlx::PgConnection,
    actor: Uuid,
    idempotency: Option<&Idempotency>,
) -> Result<Option<Value>> {
    let Some(key) = idempotency else {
        return Ok(None);
    };
    if idempotency::claim(&mut *tx, actor, &key.key, &key.request_hash).await? {
        return Ok(None);
    }
    match idempotency::get(&mut *tx, actor, &key.key).await? {
        Some((hash, _)) if hash != key.request_hash => Err(ServiceError::IdempotencyMismatch),
        Some((_, Some(response))) => Ok(Some(response)),
        _ => Err(ServiceError::IdempotencyInProgress),
    }
}

/// Records the answer under the request's idempotency key, in the command's transaction.
async fn remember(
    tx: &mut sqlx::PgConnection,
    actor: Uuid,
    idempotency: Option<&Idempotency>,
    response: &Value,
) -> Result<()> {
    if let Some(key) = idempotency {
        idempotency::finish(&mut *tx, actor, &key.key, response).await?;
    }
    Ok(())
}

/// Pushes the player notices committed events cause (the events channel itself is
/// notified by `matches::record`). Both are delivered at commit, so listeners never see
/// an event that was rolled back.
async fn announce(
    tx: &mut sqlx::PgConnection,
    match_id: Uuid,
    state: &Match,
    stored: &[StoredEvent],
) -> Result<()> {
    for stored_event in stored {
        notify_players(tx, match_id, state, &stored_event.event).await?;
    }
    Ok(())
}

/// Tells players, on their own feed, what concerns them beyond the match view: a challenge
/// addressed to them, an opponent taking the seat of their open match.
async fn notify_players(
    tx: &mut sqlx::PgConnection,
    match_id: Uuid,
    state: &Match,
    event: &Event,
) -> Result<()> {
    match event {
        Event::MatchCreated {
            creator,
            opponent: Some(opponent),
            rules,
            ranked,
            ..
        } => {
            let payload = serde_json::json!({
                "match_id": match_id, "from": creator, "ruleset": rules.ruleset, "ranked": ranked,
            });
            store::notices::push(tx, *opponent, "challenge", &payload).await?;
        }
        Event::PlayerJoined { player, .. } => {
            if let Some(creator) = state.player(0) {
                let payload = serde_json::json!({ "match_id": match_id, "player": player });
                store::notices::push(tx, creator, "opponent_joined", &payload).await?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Folds `events` into a locked match, appends them and writes the row: the heart of
/// every state change. The clock's batch form is [`append_many`]; keep the two in step.
async fn append_events(
    tx: &mut sqlx::PgConnection,
    row: matches::MatchRow,
    events: &[Event],
    now: DateTime<Utc>,
) -> Result<(Match, Vec<StoredEvent>)> {
    let mut state = row.state;
    state.evolve_all(events);
    // A ranked result and its rating change are one fact: same transaction, same append.
    let mut events = events.to_vec();
    if let Some(rating) = crate::ladder::settle(&mut *tx, &state, &events, now).await? {
        state.evolve_all(std::slice::from_ref(&rating));
        events.push(rating);
    }
    let stored = matches::record(
        &mut *tx,
        row.id,
        row.last_seq,
        now,
        &events,
        &state,
        EVENTS_CHANNEL,
    )
    .await?;
    crate::ladder::record(&mut *tx, row.id, &stored).await?;
    Ok((state, stored))
}

/// [`append_events`] then [`announce`] for many locked matches at once, in a few statements
/// instead of a few per match: the clock's path, which may change thousands of matches in
/// the same second. Whatever those two do for one match must be done here for each.
async fn append_many(
    tx: &mut sqlx::PgConnection,
    changes: Vec<(matches::MatchRow, Vec<Event>)>,
    now: DateTime<Utc>,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    // A ranked result and its rating change are one fact, on this path as on commands.
    let mut prepared = Vec::with_capacity(changes.len());
    for (row, mut events) in changes {
        let mut state = row.state.clone();
        state.evolve_all(&events);
        if let Some(rating) = crate::ladder::settle(&mut *tx, &state, &events, now).await? {
            state.evolve_all(std::slice::from_ref(&rating));
            events.push(rating);
        }
        prepared.push((row, events, state));
    }
    let appends: Vec<(Uuid, i64, &[Event])> = prepared
        .iter()
        .map(|(row, events, _)| (row.id, row.last_seq, events.as_slice()))
        .collect();
    let stored = store::events::append_many(&mut *tx, &appends, now).await?;
    let mut folded = Vec::with_capacity(prepared.len());
    for ((row, _, state), stored) in prepared.iter().zip(stored) {
        crate::ladder::record(&mut *tx, row.id, &stored).await?;
        let last_seq = stored.last().map_or(row.last_seq, |event| event.seq);
        folded.push((row.id, state, stored, last_seq));
    }
    let updates: Vec<(Uuid, &Match, i64)> = folded
        .iter()
        .map(|(id, state, _, last_seq)| (*id, *state, *last_seq))
        .collect();
    matches::update_many(&mut *tx, &updates, now).await?;
    let mut announced = Vec::with_capacity(folded.len());
    for (id, state, stored, last_seq) in &folded {
        for stored_event in stored {
            notify_players(tx, *id, state, &stored_event.event).await?;
        }
        announced.push(format!("{id}:{last_seq}"));
    }
    store::events::notify_many(&mut *tx, EVENTS_CHANNEL, &announced).await?;
    Ok(())
}

/// Renders a match as `viewer` sees it at `now`.
pub fn render(
    id: Uuid,
    state: &Match,
    seq: i64,
    created_at: DateTime<Utc>,
    viewer: Uuid,
    now: DateTime<Utc>,
) -> MatchResource {
    MatchResource {
        id,
        ruleset: state.rules.ruleset,
        seq,
        created_at,
        deadline_ms_left: ms_left(state.deadline, now),
        view: state.view(viewer_of(state, viewer)),
    }
}

/// A participant sees their own side; anyone else is a spectator.
pub fn viewer_of(state: &Match, player: Uuid) -> Viewer {
    if state.seat_of(player).is_some() {
        Viewer::Player(player)
    } else {
        Viewer::Spectator
    }
}

/// The shooter's answer, built from the events a shot caused.
pub fn shot_answer(committed: &Committed<'_>) -> Option<ShotAnswer> {
    let (state, stored, now) = (committed.state, committed.stored, committed.now);
    let first = stored.first()?;
    let shooter = first.event.actor()?;
    let Event::ShotFired {
        cell,
        outcome,
        sunk_ship,
        marked,
        next_turn,
        deadline,
        ..
    } = state.redact(&first.event, Viewer::Player(shooter))
    else {
        return None;
    };
    // The shooter does not learn which of the opponent's ships sank beyond what the
    // preset reveals, even after the last shot makes the record public.
    let reveal_type = state.rules.preset().sink_reveals.ship_type;
    let sunk_ship = sunk_ship.map(|ship| SunkShip {
        index: None,
        name: if reveal_type { ship.name } else { None },
        cells: ship.cells,
    });
    Some(ShotAnswer {
        cell,
        outcome,
        sunk_ship,
        marked,
        next_turn,
        deadline,
        deadline_ms_left: ms_left(deadline, now),
        phase: state.phase,
        result: state.result,
        seq: stored.last().map_or(first.seq, |event| event.seq),
    })
}
