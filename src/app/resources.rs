//! The typed results of the use cases, as `http` serialises them and `openapi.yaml`
//! documents them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::ladder::LadderStanding;
use crate::engine::{
    Cell, Clock, Event, HouseOptions, Match, MatchResult, MatchView, OpenedFleet, Outcome, Phase,
    RuleSetId, SunkShip, Viewer,
};
use crate::store::StoredEvent;

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
    pub ladders: Vec<LadderStanding>,
}

/// What a lobby asks for when creating a match.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMatch {
    /// `statki` (default), `classic` or `battaglia`.
    #[serde(default)]
    #[schema(value_type = Option<RuleSetId>)]
    pub ruleset: Option<String>,
    #[serde(default)]
    pub ranked: bool,
    #[serde(default)]
    pub options: Option<HouseOptions>,
    /// Unranked only: own clocks within bounds (placement 5–600 s, shot 2–120 s).
    #[serde(default)]
    #[schema(value_type = Option<OwnClock>)]
    pub clock: Option<Clock>,
    /// A direct challenge: only this player may join. A bot's id (see `GET /v1/bots`)
    /// challenges that bot; such a match is never ranked (`422 ranked_against_bot`).
    #[serde(default)]
    pub opponent: Option<Uuid>,
}

/// An unranked match's own clocks, in whole seconds (the schema of `NewMatch.clock`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct OwnClock {
    /// Time both players share to place their fleets, from the second player's join.
    #[schema(minimum = 5, maximum = 600)]
    placement_seconds: u32,
    /// Time for every single shot, restarted after each shot.
    #[schema(minimum = 2, maximum = 120)]
    shot_seconds: u32,
}

/// Whose view of a match this is: a seat's, with its own side, or a spectator's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ViewerKind {
    Participant,
    Spectator,
}

/// A match as one caller sees it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MatchResource {
    /// `participant` (the view has the caller's own side) or `spectator`.
    pub viewer: ViewerKind,
    pub id: Uuid,
    pub ruleset: RuleSetId,
    /// Sequence number of the latest event.
    pub seq: i64,
    pub created_at: DateTime<Utc>,
    /// Milliseconds until `deadline`, by the server's clock.
    pub deadline_ms_left: Option<i64>,
    #[serde(flatten)]
    pub view: MatchView,
    /// The name of every player the view names (seats and the invited player), by id.
    /// Reads carry it; the answers to commands leave it out.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub names: BTreeMap<Uuid, String>,
    /// Whether each seated player is online (holds an open event stream, on any replica;
    /// a bot always is) or away. Reads of a running match (waiting, placement or battle)
    /// carry it; the answers to commands and the reads of a match that is over leave it out.
    /// A match stream tells changes as `presence` events.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub presence: BTreeMap<Uuid, Presence>,
}

/// Whether a player is in the game right now: `online` while they hold an open event
/// stream (a match's or their own feed), `away` otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    Online,
    Away,
}

impl Presence {
    pub fn of(online: bool) -> Self {
        if online { Self::Online } else { Self::Away }
    }
}

/// A match stream's `presence` event: a player of the match came online or went away.
/// It has no `id:` (it is not one of the match's numbered events, and is never stored or
/// replayed): a client that resumes reads the view's `presence` again.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PresenceChange {
    #[schema(inline)]
    pub kind: PresenceKind,
    pub player: Uuid,
    pub presence: Presence,
}

/// The `kind` of a match stream's `presence` event.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PresenceKind {
    Presence,
}

impl MatchResource {
    /// Sets the presence of the match's seated players from the ids of those online, while
    /// the match runs (waiting, placement or battle): a match that is over tells no one
    /// whether its players are online now.
    pub fn set_presence(&mut self, online: &[Uuid]) {
        if matches!(self.view.phase, Phase::Finished | Phase::Cancelled) {
            self.presence.clear();
            return;
        }
        self.presence = self
            .view
            .players
            .iter()
            .map(|player| (*player, Presence::of(online.contains(player))))
            .collect();
    }

    /// The seated players, creator first.
    pub fn seated(&self) -> Vec<Uuid> {
        self.view.players.clone()
    }

    /// Renders a match as `viewer` sees it at `now`.
    pub fn render(
        id: Uuid,
        state: &Match,
        seq: i64,
        created_at: DateTime<Utc>,
        viewer: Uuid,
        now: DateTime<Utc>,
    ) -> Self {
        let view = state.view(viewer_of(state, viewer));
        MatchResource {
            viewer: if view.participant.is_some() {
                ViewerKind::Participant
            } else {
                ViewerKind::Spectator
            },
            id,
            ruleset: state.rules.ruleset,
            seq,
            created_at,
            deadline_ms_left: ms_left(state.deadline, now),
            view,
            names: BTreeMap::new(),
            presence: BTreeMap::new(),
        }
    }
}

/// The answer to a shot.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ShotAnswer {
    #[schema(value_type = String)]
    pub cell: Cell,
    pub outcome: Outcome,
    pub sunk_ship: Option<SunkShip>,
    /// Cells now known to be empty around a sunk ship.
    #[schema(value_type = Vec<String>)]
    pub marked: Vec<Cell>,
    pub next_turn: Option<Uuid>,
    pub deadline: Option<DateTime<Utc>>,
    pub deadline_ms_left: Option<i64>,
    pub phase: Phase,
    pub result: Option<MatchResult>,
    pub seq: i64,
}

impl ShotAnswer {
    /// The shooter's answer, from the shot's event as the shooter saw it when it was fired
    /// (even the last shot tells no more than the preset reveals on a sink), and the
    /// match's state after it.
    pub fn render(shot: &Event, state: &Match, seq: i64, now: DateTime<Utc>) -> Option<Self> {
        let shooter = shot.actor()?;
        let Event::ShotFired {
            cell,
            outcome,
            sunk_ship,
            marked,
            next_turn,
            deadline,
            ..
        } = state.redact_as_played(shot, Viewer::Player(shooter))
        else {
            return None;
        };
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
            seq,
        })
    }
}

/// One event of a match's feed, redacted for the caller.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct EventResource {
    pub seq: i64,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
    /// For an event that sets a clock: milliseconds from `at` to its `deadline`, so a
    /// client can show the clock without comparing its own time with the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms_left: Option<i64>,
    /// The names of the match's players, by id.
    pub names: BTreeMap<Uuid, String>,
    /// On `match_finished` only: both fleets opened with their salts, as the finished
    /// view's `record`, so a stream's last event carries the whole record.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Vec<OpenedFleet>)]
    pub record: Option<Vec<OpenedFleet>>,
}

impl EventResource {
    /// `stored` as `viewer` may see it in `state` (the match as of the latest event):
    /// redacted until the match is over, and a `match_finished` with the record. A
    /// `match_created` states its rules as played, as views do (`classic` gives an extra
    /// shot on a hit whatever the stored option says).
    pub fn new(
        stored: &StoredEvent,
        state: &Match,
        viewer: Viewer,
        names: BTreeMap<Uuid, String>,
    ) -> Self {
        let record = match stored.event {
            Event::MatchFinished { .. } => state.record(),
            _ => None,
        };
        let event = match state.redact(&stored.event, viewer) {
            Event::MatchCreated {
                creator,
                rules,
                ranked,
                opponent,
                deadline,
            } => Event::MatchCreated {
                creator,
                rules: rules.effective(),
                ranked,
                opponent,
                deadline,
            },
            other => other,
        };
        let deadline = match &event {
            Event::MatchCreated { deadline, .. }
            | Event::PlayerJoined { deadline, .. }
            | Event::BattleStarted { deadline, .. }
            | Event::ClockExtended { deadline, .. } => Some(*deadline),
            Event::ShotFired { deadline, .. } => *deadline,
            _ => None,
        };
        Self {
            seq: stored.seq,
            at: stored.at,
            deadline_ms_left: ms_left(deadline, stored.at),
            event,
            names,
            record,
        }
    }
}

/// The first event of a match stream opened without a resume point: the caller's whole
/// view at `seq` (what `GET /v1/matches/{id}` answers), so a client needs no other read
/// before following the events after it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MatchState {
    /// The view's sequence number: the stream's next event is `seq + 1`.
    pub seq: i64,
    #[schema(inline)]
    pub kind: StateKind,
    /// The caller's view, as `GET /v1/matches/{id}` answers it.
    pub view: MatchResource,
}

/// The `kind` of a match stream's `state` event.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    State,
}

impl MatchState {
    pub fn new(view: MatchResource) -> Self {
        Self {
            seq: view.seq,
            kind: StateKind::State,
            view,
        }
    }
}

/// Milliseconds from `now` until `deadline`, never negative.
pub fn ms_left(deadline: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<i64> {
    deadline.map(|deadline| (deadline - now).num_milliseconds().max(0))
}

/// A participant sees their own side; anyone else is a spectator.
pub fn viewer_of(state: &Match, player: Uuid) -> Viewer {
    if state.seat_of(player).is_some() {
        Viewer::Player(player)
    } else {
        Viewer::Spectator
    }
}
