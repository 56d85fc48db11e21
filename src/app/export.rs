//! Exports of ended matches: one match as a whole document (its rules, players, both
//! fleets opened with their salts and commitments, every event), the same as one line per
//! move, and a player's finished matches a page at a time, newest first.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{App, AppError, EventResource, Result};
use crate::engine::{
    Event, MatchResult, MatchRules, OpenedFleet, Outcome, Phase, RuleSetId, Viewer,
};
use crate::store::listing::{self, Cursor, Listing, NamedRow};
use crate::store::{self, StoredEvent, players};

/// Matches read from the database at a time by a player's export.
const EXPORT_PAGE: i64 = 50;

/// An ended match as one document: everything needed to replay it and check both
/// commitments without another request.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MatchExport {
    pub id: Uuid,
    pub ruleset: RuleSetId,
    /// The rules as played (house options and clocks).
    pub rules: MatchRules,
    pub ranked: bool,
    /// `finished`, or `cancelled` for a match that never started.
    pub phase: Phase,
    /// Seat order: creator first (`A` in the text form), then the joiner (`B`).
    pub players: Vec<Uuid>,
    /// The name of every player the export names, by id.
    pub names: BTreeMap<Uuid, String>,
    pub created_at: DateTime<Utc>,
    /// When the last event was recorded.
    pub ended_at: DateTime<Utc>,
    /// Null for a cancelled match, as in views.
    pub result: Option<MatchResult>,
    /// Both fleets opened: ships in fleet order, salt, commitment, and whether the
    /// commitment checks out (none for a match that ended before any fleet was locked).
    pub fleets: Vec<OpenedFleet>,
    /// The whole event log in order, unredacted (the match is over), in the form
    /// `GET /v1/matches/{id}/events` gives. At most 507 events (`MATCH_EVENTS_MAX`: single-ship
    /// moves are capped at 100 per player, and every other kind of event is bounded by the rules).
    #[schema(max_items = 507)]
    pub events: Vec<EventResource>,
}

impl MatchExport {
    /// The export of `named` with its whole log, or `None` while it is still being played.
    fn new(named: NamedRow, log: &[StoredEvent]) -> Option<Self> {
        let NamedRow { row, names } = named;
        let state = &row.state;
        if !state.phase.is_over() {
            return None;
        }
        let events: Vec<EventResource> = log
            .iter()
            .map(|stored| EventResource::new(stored, state, Viewer::Spectator, names.clone()))
            .collect();
        Some(MatchExport {
            id: row.id,
            ruleset: state.rules.ruleset,
            rules: state.rules.effective(),
            ranked: state.ranked,
            phase: state.phase,
            players: state.players(),
            ended_at: log.last().map_or(row.created_at, |last| last.at),
            created_at: row.created_at,
            result: state.result,
            fleets: state.record().unwrap_or_default(),
            names,
            events,
        })
    }

    /// The compact text form: a few `#` header lines (the match, its players as `A` and
    /// `B`, both opened fleets), then one line per move, each starting with the sequence
    /// number of its event in the log. The README ("One line per move") describes it.
    pub fn moves_text(&self) -> String {
        let letter = |player: &Uuid| match self.players.iter().position(|seat| seat == player) {
            Some(0) => "A",
            Some(_) => "B",
            None => "?",
        };
        let name = |player: &Uuid| self.names.get(player).map_or("?", String::as_str);
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# statki match {} {} {} created {}",
            self.id,
            self.ruleset.as_str(),
            if self.ranked { "ranked" } else { "unranked" },
            self.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        );
        for player in &self.players {
            let _ = writeln!(text, "# {} {} {}", letter(player), player, name(player));
        }
        for fleet in &self.fleets {
            let ships: Vec<String> = fleet
                .ships
                .iter()
                .map(|ship| format!("{}{}", ship.cell, ship.orientation.letter()))
                .collect();
            let _ = writeln!(
                text,
                "# fleet {} {} salt {} commitment {} {}",
                letter(&fleet.player),
                ships.join(","),
                fleet.salt,
                fleet.commitment,
                if fleet.commitment_verified {
                    "verified"
                } else {
                    "NOT VERIFIED"
                },
            );
        }
        for resource in &self.events {
            if let Some(line) = move_line(&resource.event, &letter) {
                let _ = writeln!(text, "{} {line}", resource.seq);
            }
        }
        text
    }
}

/// One event as a move line (without its sequence number), or `None` for the events the
/// header already tells (creation, joining, placement: the fleets are in the header).
fn move_line(event: &Event, letter: &dyn Fn(&Uuid) -> &'static str) -> Option<String> {
    match event {
        Event::MatchCreated { .. }
        | Event::PlayerJoined { .. }
        | Event::ShipPlaced { .. }
        | Event::ShipRemoved { .. } => None,
        Event::FleetLocked { player, .. } => Some(format!("{} ready", letter(player))),
        Event::BattleStarted { first, .. } => Some(format!("{} first", letter(first))),
        Event::ShotFired {
            player,
            cell,
            outcome,
            sunk_ship,
            ..
        } => Some(match (outcome, sunk_ship) {
            (Outcome::Miss, _) => format!("{} {cell} miss", letter(player)),
            (Outcome::Hit, _) => format!("{} {cell} hit", letter(player)),
            (Outcome::Sunk, Some(ship)) => format!(
                "{} {cell} sunk {}",
                letter(player),
                ship.name
                    .clone()
                    .unwrap_or_else(|| ship.cells.len().to_string())
            ),
            (Outcome::Sunk, None) => format!("{} {cell} sunk", letter(player)),
        }),
        Event::ClockExtended { milliseconds, .. } => Some(format!("clock +{milliseconds}ms")),
        Event::MatchFinished { winner, reason } => Some(match winner {
            Some(winner) => format!("{} wins {}", letter(winner), reason.as_str()),
            None => format!("draw {}", reason.as_str()),
        }),
        Event::MatchCancelled { reason } => Some(format!("cancelled {}", reason.as_str())),
        Event::Reaction {
            player, reaction, ..
        } => Some(format!("{} reacts {}", letter(player), reaction.as_str())),
        Event::RatingUpdated { changes, .. } => Some(
            changes
                .iter()
                .map(|change| {
                    format!(
                        "{} {:.0}>{:.0}",
                        letter(&change.player),
                        change.before.rating,
                        change.after.rating
                    )
                })
                .fold("rating".to_owned(), |line, part| line + " " + &part),
        ),
    }
}

/// Where a player's export goes next, and whether it ended.
pub struct ExportPage {
    pub matches: Vec<MatchExport>,
    /// Where the next page starts; `None` when nothing older can qualify.
    pub next: Option<Cursor>,
}

impl App {
    /// Match `id` as one document, once it is over. Read from the primary: a match that
    /// has just ended is exportable at once.
    pub async fn export(&self, id: Uuid) -> Result<MatchExport> {
        let named = listing::get(self.pool(), id)
            .await?
            .ok_or(AppError::NotFound("match"))?;
        if !named.row.state.phase.is_over() {
            return Err(AppError::NotOver);
        }
        let log = store::events::list(self.pool(), id, 0, i64::MAX).await?;
        MatchExport::new(named, &log).ok_or(AppError::NotOver)
    }

    /// A page of `player`'s finished matches created before `cursor`, newest first, none
    /// created before `since`, at most `limit`. Read from the standby when there is one
    /// (a match that ended a moment ago may come on a later export).
    pub async fn export_page(
        &self,
        player: Uuid,
        cursor: Cursor,
        since: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<ExportPage> {
        self.read_lagging(|pool| async move {
            players::get(&pool, player)
                .await?
                .ok_or(AppError::NotFound("player"))?;
            let listing = Listing::PlayerOf { player };
            let rows = listing::page(&pool, listing, Some(cursor), EXPORT_PAGE).await?;
            let full_page = rows.len() as i64 == EXPORT_PAGE;
            let next = rows.last().map(|last| Cursor {
                created_at: last.named.row.created_at,
                id: last.named.row.id,
            });
            let wanted: Vec<NamedRow> = rows
                .into_iter()
                .map(|listed| listed.named)
                .take_while(|named| since.is_none_or(|since| named.row.created_at >= since))
                .filter(|named| named.row.state.phase == Phase::Finished)
                .take(usize::try_from(limit).unwrap_or(0))
                .collect();
            // The page went past `since` (or was the last) when a row was cut by it.
            let reached_since =
                next.is_some_and(|next| since.is_some_and(|since| next.created_at < since));
            let ids: Vec<Uuid> = wanted.iter().map(|named| named.row.id).collect();
            let mut logs = store::events::logs(&pool, &ids).await?;
            let mut matches = Vec::with_capacity(wanted.len());
            for named in wanted {
                let log = logs
                    .remove(&named.row.id)
                    .unwrap_or_else(|| Ok(Vec::new()))?;
                matches.extend(MatchExport::new(named, &log));
            }
            Ok(ExportPage {
                matches,
                next: next.filter(|_| full_page && !reached_since),
            })
        })
        .await
    }
}
