//! Ranked matchmaking and rematches: the queue pairs players by closest rating within a
//! window that widens while they wait, and two rematch offers start a new match. Both
//! start matches with both seats taken and the placement clock running (see docs/ladder.md).
//!
//! Pairing is safe with any number of replicas: a joining player claims a partner with
//! `FOR UPDATE SKIP LOCKED` inside the join's transaction, and a periodic sweep (one
//! replica at a time, by advisory lock) pairs whoever two concurrent joins could not see,
//! drops expired entries and rematch offers.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::PgConnection;
use tokio::sync::watch;
use utoipa::ToSchema;
use uuid::Uuid;

use super::committed::Tx;
use super::idempotency::{Answer, Idempotency, claim_or_replay, remember};
use super::write::{self, Change, notify_players};
use super::{App, AppError, NewMatch, Result};
use crate::engine::{Command, Match, MatchRules, Phase, Refusal, RuleSetId};
use crate::store::citus::Kind;
use crate::store::queue::{self, Entry, Window};
use crate::store::{matches, ratings, rematch};

/// How far apart two ratings may be to pair: 100 points at first, 5 more for every second
/// the longer-waiting player has waited, at most 1000 (reached after three minutes).
pub const WINDOW: Window = Window {
    base: 100.0,
    per_second: 5.0,
    max: 1000.0,
};
/// A waiting entry nobody could pair is dropped after this long.
pub const QUEUE_SECONDS: i64 = 600;
/// How long `GET /v1/queue` keeps showing a pairing.
pub const PAIRED_KEEP_SECONDS: i64 = 600;
/// How long a rematch offer stands.
pub const REMATCH_SECONDS: i64 = 120;
/// Pause between two sweeps of one replica.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);
/// Most waiting entries one sweep considers.
pub const SWEEP_BATCH: i64 = 1000;
/// The advisory lock that lets one replica sweep at a time.
const SWEEP_LOCK: i64 = 0x7374_6174_6b69_0002;

/// The caller's place in the queue.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum QueueState {
    /// Not queued.
    Idle,
    /// Waiting for an opponent.
    Queued {
        ruleset: RuleSetId,
        /// The ladder rating pairing compares.
        rating: f64,
        joined_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        /// The rating gap currently accepted; it widens while waiting.
        window: f64,
        /// Players waiting on this ladder, the caller included.
        waiting: i64,
    },
    /// Paired: the ranked match is under way.
    Paired {
        ruleset: RuleSetId,
        match_id: Uuid,
        paired_at: DateTime<Utc>,
    },
}

/// The rating gap an entry that joined at `joined_at` accepts at `now`.
pub fn window_at(joined_at: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    let waited = (now - joined_at).num_milliseconds().max(0) as f64 / 1000.0;
    (WINDOW.base + WINDOW.per_second * waited).min(WINDOW.max)
}

/// Pairs waiting entries: longest waiting first, each with the closest rating on the same
/// ladder within the wider of the two windows. Pure, so the policy is unit-tested.
pub fn plan_pairs(entries: &[Entry], now: DateTime<Utc>) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| (entries[i].joined_at, entries[i].player_id));
    let mut taken = vec![false; entries.len()];
    let mut pairs = Vec::new();
    for &a in &order {
        if taken[a] {
            continue;
        }
        let best = order
            .iter()
            .copied()
            .filter(|&b| b != a && !taken[b] && entries[b].ruleset == entries[a].ruleset)
            .filter(|&b| entries[b].player_id != entries[a].player_id)
            .filter(|&b| {
                let gap = (entries[a].rating - entries[b].rating).abs();
                let window =
                    window_at(entries[a].joined_at, now).max(window_at(entries[b].joined_at, now));
                gap <= window
            })
            .min_by(|&x, &y| {
                let gx = (entries[a].rating - entries[x].rating).abs();
                let gy = (entries[a].rating - entries[y].rating).abs();
                gx.total_cmp(&gy)
            });
        if let Some(b) = best {
            taken[a] = true;
            taken[b] = true;
            pairs.push((a, b));
        }
    }
    pairs
}

async fn db_now(conn: &mut PgConnection) -> Result<DateTime<Utc>> {
    Ok(crate::store::now(conn).await?)
}

async fn in_live_match(conn: &mut PgConnection, player: Uuid) -> Result<bool> {
    Ok(matches::in_live_match(conn, player).await?)
}

/// Starts a match between `first` (seat 0) and `second` (seat 1) with the placement clock
/// running, inside the caller's transaction, through the write path. Returns the new
/// match's id; the use case tells the players.
pub(crate) async fn start_match(
    conn: &mut Tx,
    kind: Kind,
    rules: MatchRules,
    ranked: bool,
    first: Uuid,
    second: Uuid,
    now: DateTime<Utc>,
) -> Result<Uuid> {
    // The invitation names the opponent, so the log shows the match was arranged for two.
    let created = Match::create(first, rules, ranked, Some(second), now)?;
    let state = Match::fold([&created]).map_err(|e| AppError::Corrupt(e.to_string()))?;
    let joined = state.decide(second, &Command::Join, now, super::draw())?;
    let mut events = vec![created];
    events.extend(joined);
    let id = Uuid::now_v7();
    write::apply(conn, kind, vec![Change::new_match(id, events, now)?], now).await?;
    metrics::counter!("statki_matches_arranged_total").increment(1);
    Ok(id)
}

/// Starts the ranked match of a pair (`first` waited longer) and tells both.
async fn pair(
    conn: &mut Tx,
    kind: Kind,
    rules: MatchRules,
    first: Uuid,
    second: Uuid,
    now: DateTime<Utc>,
    notes: &mut Vec<(Uuid, &'static str, Value)>,
) -> Result<Uuid> {
    let match_id = start_match(conn, kind, rules, true, first, second, now).await?;
    queue::mark_paired(&mut **conn, &[first, second], match_id, now).await?;
    for (player, opponent) in [(first, second), (second, first)] {
        let payload = json!({
            "match_id": match_id, "ruleset": rules.ruleset, "ranked": true, "opponent": opponent,
        });
        notes.push((player, "paired", payload));
    }
    Ok(match_id)
}

fn ranked_rules(app: &App, ruleset: RuleSetId) -> Result<MatchRules> {
    app.resolve_rules(&NewMatch {
        ruleset: Some(ruleset.as_str().to_owned()),
        ranked: true,
        options: None,
        clock: None,
        opponent: None,
    })
}

/// Puts `player` in the ranked queue of `ruleset` and pairs them at once when a waiting
/// player's window reaches their rating. Returns the queue state as answered.
#[tracing::instrument(skip(app, idempotency))]
pub async fn join(
    app: &App,
    player: Uuid,
    ruleset: &str,
    idempotency: Option<&Idempotency>,
) -> Result<Answer<QueueState>> {
    let id =
        RuleSetId::parse(ruleset).ok_or_else(|| AppError::UnknownRuleset(ruleset.to_owned()))?;
    let rules = ranked_rules(app, id)?;
    let mut tx = app.begin().await?;
    if let Some(answer) = claim_or_replay(&mut tx, player, idempotency).await? {
        return Ok(Answer::Replayed(answer));
    }
    let now = db_now(&mut tx).await?;
    if in_live_match(&mut tx, player).await? {
        return Err(AppError::InMatch);
    }
    let rating = ratings::get(&mut *tx, id.as_str(), player)
        .await?
        .map_or_else(|| super::ladder::initial().rating, |s| s.rating.rating);
    let expires_at = now + chrono::Duration::seconds(QUEUE_SECONDS);
    if !queue::join(&mut *tx, player, id.as_str(), rating, now, expires_at).await? {
        return Err(AppError::AlreadyQueued);
    }
    let kind = app.kind(&mut tx).await?;
    let partner =
        queue::claim_partner(&mut tx, kind, player, id.as_str(), rating, now, WINDOW).await?;
    let state = match partner {
        Some(partner) => {
            let mut notes = Vec::new();
            let match_id = pair(
                &mut tx,
                kind,
                rules,
                partner.player_id,
                player,
                now,
                &mut notes,
            )
            .await?;
            notify_players(&mut tx, notes).await?;
            QueueState::Paired {
                ruleset: id,
                match_id,
                paired_at: now,
            }
        }
        None => QueueState::Queued {
            ruleset: id,
            rating,
            joined_at: now,
            expires_at,
            window: window_at(now, now),
            waiting: queue::waiting(&mut *tx, id.as_str(), now).await?,
        },
    };
    remember(&mut tx, player, idempotency, &state).await?;
    tx.commit().await?;
    Ok(Answer::Fresh(state))
}

/// Takes `player` out of the queue.
#[tracing::instrument(skip(app))]
pub async fn leave(app: &App, player: Uuid) -> Result<QueueState> {
    let mut tx = app.begin().await?;
    let now = db_now(&mut tx).await?;
    if !queue::leave(&mut *tx, player, now).await? {
        return Err(AppError::NotQueued);
    }
    tx.commit().await?;
    Ok(QueueState::Idle)
}

/// `player`'s place in the queue.
#[tracing::instrument(skip(app))]
pub async fn state(app: &App, player: Uuid) -> Result<QueueState> {
    let mut conn = app.pool().acquire().await?;
    let now = db_now(&mut conn).await?;
    let Some(entry) = queue::get(&mut *conn, player).await? else {
        return Ok(QueueState::Idle);
    };
    let ruleset = RuleSetId::parse(&entry.ruleset)
        .ok_or_else(|| AppError::Corrupt(format!("queued on `{}`", entry.ruleset)))?;
    Ok(match (entry.match_id, entry.paired_at) {
        (Some(match_id), Some(paired_at)) => QueueState::Paired {
            ruleset,
            match_id,
            paired_at,
        },
        _ if entry.expires_at <= now => QueueState::Idle,
        _ => QueueState::Queued {
            ruleset,
            rating: entry.rating,
            joined_at: entry.joined_at,
            expires_at: entry.expires_at,
            window: window_at(entry.joined_at, now),
            waiting: queue::waiting(&mut *conn, &entry.ruleset, now).await?,
        },
    })
}

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    pub paired: usize,
    pub purged: u64,
}

/// One sweep, deciding by `now` (tests pass a later time to see windows widen): drops
/// expired entries and offers, and pairs waiting players. Matches start on the database's
/// clock. Skipped when another replica is sweeping.
#[tracing::instrument(skip(app))]
pub async fn sweep(app: &App, now: DateTime<Utc>) -> Result<Sweep> {
    let mut tx = app.begin().await?;
    let mine = crate::store::try_advisory_xact_lock(&mut *tx, SWEEP_LOCK).await?;
    if !mine {
        return Ok(Sweep::default());
    }
    let paired_before = now - chrono::Duration::seconds(PAIRED_KEEP_SECONDS);
    let kind = app.kind(&mut tx).await?;
    let purged = queue::purge(&mut *tx, now, paired_before).await?
        + rematch::purge(&mut tx, kind, now).await?;
    let entries = queue::claim_waiting(&mut tx, kind, now, SWEEP_BATCH).await?;
    let plan = plan_pairs(&entries, now);
    let started = db_now(&mut tx).await?;
    let mut notes = Vec::new();
    for &(a, b) in &plan {
        let Some(ruleset) = RuleSetId::parse(&entries[a].ruleset) else {
            continue;
        };
        let rules = ranked_rules(app, ruleset)?;
        let (first, second) = (entries[a].player_id, entries[b].player_id);
        pair(&mut tx, kind, rules, first, second, started, &mut notes).await?;
    }
    notify_players(&mut tx, notes).await?;
    tx.commit().await?;
    if !plan.is_empty() {
        metrics::counter!("statki_queue_pairs_total").increment(plan.len() as u64);
    }
    Ok(Sweep {
        paired: plan.len(),
        purged,
    })
}

/// The sweep task of one replica, until `stop` turns true.
pub async fn run(app: App, mut stop: watch::Receiver<bool>) {
    loop {
        let now = app.now().await;
        match now {
            Ok(now) => {
                if let Err(error) = sweep(&app, now).await {
                    tracing::error!(%error, "matchmaking sweep failed");
                }
            }
            Err(error) => tracing::error!(%error, "matchmaking sweep: no database time"),
        }
        tokio::select! {
            () = tokio::time::sleep(SWEEP_INTERVAL) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// A standing rematch offer.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct RematchOffer {
    pub player: Uuid,
    pub expires_at: DateTime<Utc>,
    /// Milliseconds until `expires_at`, by the server's clock.
    pub expires_ms_left: i64,
}

impl RematchOffer {
    fn new(player: Uuid, expires_at: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        RematchOffer {
            player,
            expires_at,
            expires_ms_left: (expires_at - now).num_milliseconds().max(0),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RematchStatus {
    /// Nobody has a standing offer.
    None,
    /// One player offered; the other has until the offer expires to ask too.
    Offered,
    /// Both asked: `rematch_id` is the new match.
    Started,
}

/// The rematch state of a finished match.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct RematchState {
    pub match_id: Uuid,
    pub status: RematchStatus,
    pub offers: Vec<RematchOffer>,
    pub rematch_id: Option<Uuid>,
}

/// The rematch state of `match_id`, as anyone may see it.
#[tracing::instrument(skip(app))]
pub async fn rematch_state(app: &App, match_id: Uuid) -> Result<RematchState> {
    let mut conn = app.pool().acquire().await?;
    matches::get(&mut *conn, match_id)
        .await?
        .ok_or(AppError::NotFound("match"))?;
    let now = db_now(&mut conn).await?;
    if let Some(rematch_id) = rematch::started(&mut *conn, match_id).await? {
        return Ok(RematchState {
            match_id,
            status: RematchStatus::Started,
            offers: Vec::new(),
            rematch_id: Some(rematch_id),
        });
    }
    let offers: Vec<RematchOffer> = rematch::offers(&mut *conn, match_id, now)
        .await?
        .into_iter()
        .map(|offer| RematchOffer::new(offer.player_id, offer.expires_at, now))
        .collect();
    Ok(RematchState {
        match_id,
        status: if offers.is_empty() {
            RematchStatus::None
        } else {
            RematchStatus::Offered
        },
        offers,
        rematch_id: None,
    })
}

/// `player` asks to play finished match `match_id` again. The first ask is an offer to
/// the opponent; the opponent's ask while it stands starts the rematch, with the same rule
/// set and rankedness and the seats swapped. Asking again is harmless: an offer is
/// renewed, and after the start every ask answers the same new match. A retry with the
/// same `idempotency` key answers the first answer and renews nothing.
#[tracing::instrument(skip(app))]
pub async fn ask_rematch(
    app: &App,
    match_id: Uuid,
    player: Uuid,
    idempotency: Option<&Idempotency>,
) -> Result<Answer<RematchState>> {
    let mut tx = app.begin().await?;
    if let Some(answer) = claim_or_replay(&mut tx, player, idempotency).await? {
        return Ok(Answer::Replayed(answer));
    }
    let answer = rematch_in(app, &mut tx, match_id, player).await?;
    remember(&mut tx, player, idempotency, &answer).await?;
    tx.commit().await?;
    Ok(Answer::Fresh(answer))
}

/// [`ask_rematch`] inside its transaction.
async fn rematch_in(app: &App, tx: &mut Tx, match_id: Uuid, player: Uuid) -> Result<RematchState> {
    let (row, now) = matches::lock(&mut **tx, match_id)
        .await?
        .ok_or(AppError::NotFound("match"))?;
    let state = &row.state;
    let seat = state.seat_of(player).ok_or(Refusal::NotAPlayer)?;
    if state.phase != Phase::Finished {
        return Err(AppError::RematchUnavailable(
            "only a finished match can be played again",
        ));
    }
    let opponent = state
        .player(1 - seat)
        .ok_or(AppError::RematchUnavailable("the match had no opponent"))?;
    if let Some(rematch_id) = rematch::started(&mut **tx, match_id).await? {
        return Ok(RematchState {
            match_id,
            status: RematchStatus::Started,
            offers: Vec::new(),
            rematch_id: Some(rematch_id),
        });
    }
    let offers = rematch::offers(&mut **tx, match_id, now).await?;
    let ruleset = state.rules.ruleset;
    let ranked = state.ranked;
    if offers.iter().any(|offer| offer.player_id == opponent) {
        // A ranked rematch is held to today's standard rules like any ranked match; an
        // unranked one keeps the house options and clocks the players chose.
        let rules = if ranked {
            ranked_rules(app, ruleset)?
        } else {
            state.rules
        };
        let (first, second) = (
            state.player(1).unwrap_or(opponent),
            state.player(0).unwrap_or(player),
        );
        let kind = app.kind(tx).await?;
        let rematch_id = start_match(tx, kind, rules, ranked, first, second, now).await?;
        rematch::record_started(tx, match_id, rematch_id, now).await?;
        queue::drop_waiting(&mut **tx, &[first, second]).await?;
        let payload = |opponent: Uuid| {
            json!({
                "match_id": rematch_id, "previous": match_id, "opponent": opponent,
                "ruleset": ruleset, "ranked": ranked,
            })
        };
        notify_players(
            tx,
            vec![
                (first, "rematch_started", payload(second)),
                (second, "rematch_started", payload(first)),
            ],
        )
        .await?;
        return Ok(RematchState {
            match_id,
            status: RematchStatus::Started,
            offers: Vec::new(),
            rematch_id: Some(rematch_id),
        });
    }
    let renewing = offers.iter().any(|offer| offer.player_id == player);
    let expires_at = now + chrono::Duration::seconds(REMATCH_SECONDS);
    rematch::offer(&mut **tx, match_id, player, now, expires_at).await?;
    if !renewing {
        let payload = json!({
            "match_id": match_id, "from": player, "ruleset": ruleset, "ranked": ranked,
            "expires_at": expires_at,
        });
        notify_players(tx, vec![(opponent, "rematch_offered", payload)]).await?;
    }
    let mut offers: Vec<RematchOffer> = offers
        .into_iter()
        .filter(|offer| offer.player_id != player)
        .map(|offer| RematchOffer::new(offer.player_id, offer.expires_at, now))
        .collect();
    offers.push(RematchOffer::new(player, expires_at, now));
    Ok(RematchState {
        match_id,
        status: RematchStatus::Offered,
        offers,
        rematch_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rating: f64, waited: i64, ruleset: &str, now: DateTime<Utc>) -> Entry {
        Entry {
            player_id: Uuid::new_v4(),
            ruleset: ruleset.into(),
            rating,
            joined_at: now - chrono::Duration::seconds(waited),
            expires_at: now + chrono::Duration::seconds(600),
            match_id: None,
            paired_at: None,
        }
    }

    #[test]
    fn the_window_widens_with_waiting_up_to_its_cap() {
        let now = Utc::now();
        assert_eq!(window_at(now, now), 100.0);
        assert_eq!(window_at(now - chrono::Duration::seconds(60), now), 400.0);
        assert_eq!(
            window_at(now - chrono::Duration::seconds(3600), now),
            1000.0
        );
    }

    #[test]
    fn the_closest_rating_within_the_window_is_chosen() {
        let now = Utc::now();
        let entries = vec![
            entry(1500.0, 30, "statki", now),
            entry(1700.0, 20, "statki", now),
            entry(1560.0, 0, "statki", now),
        ];
        assert_eq!(plan_pairs(&entries, now), vec![(0, 2)]);
    }

    #[test]
    fn far_ratings_wait_until_the_window_reaches_them() {
        let now = Utc::now();
        let fresh = vec![
            entry(1500.0, 0, "statki", now),
            entry(1800.0, 0, "statki", now),
        ];
        assert!(plan_pairs(&fresh, now).is_empty());
        let waited = vec![
            entry(1500.0, 45, "statki", now),
            entry(1800.0, 0, "statki", now),
        ];
        assert_eq!(plan_pairs(&waited, now), vec![(0, 1)]);
    }

    #[test]
    fn ladders_never_mix() {
        let now = Utc::now();
        let entries = vec![
            entry(1500.0, 0, "statki", now),
            entry(1500.0, 0, "classic", now),
        ];
        assert!(plan_pairs(&entries, now).is_empty());
    }
}
