//! A compact, serialisable copy of a match's state, kept in its row so a command loads one
//! row instead of folding the whole log.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::cell::{Cell, CellSet, Placement};
use super::fleet::Fleet;
use super::game::{CorruptLog, Match, MatchResult, Outcome, Phase, ShotRecord, Side};
use super::ruleset::MatchRules;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub rules: MatchRules,
    pub ranked: bool,
    pub phase: Phase,
    pub invited: Option<Uuid>,
    pub turn: Option<usize>,
    pub deadline: Option<DateTime<Utc>>,
    pub result: Option<MatchResult>,
    pub version: u64,
    pub sides: [SideSnapshot; 2],
    /// Absent in snapshots written before clock extensions were counted (and while none was made).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_extensions: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideSnapshot {
    pub player: Option<Uuid>,
    pub placements: Vec<Option<Placement>>,
    pub locked: bool,
    pub commitment: Option<String>,
    pub salt: Option<String>,
    pub shots: Vec<(Cell, Outcome)>,
    pub marked: Vec<Cell>,
    pub sunk: Vec<usize>,
    /// Absent in snapshots written before reactions existed (and while none was sent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reactions: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_reaction_at: Option<DateTime<Utc>>,
    /// Absent in snapshots written before single-ship moves were counted (and while none was made).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub placement_moves: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl Match {
    pub fn snapshot(&self) -> Snapshot {
        let side = |side: &Side| SideSnapshot {
            player: side.player,
            placements: side.fleet.placements(),
            locked: side.fleet.is_locked(),
            commitment: side.commitment.clone(),
            salt: side.salt.clone(),
            shots: side
                .shots
                .iter()
                .map(|shot| (shot.cell, shot.outcome))
                .collect(),
            marked: side.marked.to_vec(),
            sunk: side.sunk.clone(),
            reactions: side.reactions,
            next_reaction_at: side.next_reaction_at,
            placement_moves: side.placement_moves,
        };
        Snapshot {
            rules: self.rules,
            ranked: self.ranked,
            phase: self.phase,
            invited: self.invited,
            turn: self.turn,
            deadline: self.deadline,
            result: self.result,
            version: self.version,
            sides: [side(&self.sides[0]), side(&self.sides[1])],
            clock_extensions: self.clock_extensions,
        }
    }

    pub fn from_snapshot(snapshot: &Snapshot) -> Result<Match, CorruptLog> {
        let corrupt = CorruptLog {
            position: 0,
            kind: "snapshot",
        };
        let preset = snapshot.rules.preset();
        let side = |saved: &SideSnapshot| -> Result<Side, CorruptLog> {
            let mut fleet = Fleet::new(preset);
            if saved.placements.len() != preset.fleet.len() {
                return Err(corrupt.clone());
            }
            for (index, placement) in saved.placements.iter().enumerate() {
                if let Some(placement) = placement {
                    let cells = placement
                        .cells(preset.fleet[index].length)
                        .map_err(|_| corrupt.clone())?;
                    fleet.set(index, *placement, cells);
                }
            }
            if saved.locked {
                fleet.lock();
            }
            let shots: Vec<ShotRecord> = saved
                .shots
                .iter()
                .map(|&(cell, outcome)| ShotRecord { cell, outcome })
                .collect();
            let shot_cells: CellSet = shots.iter().map(|shot| shot.cell).collect();
            let hits: CellSet = shots
                .iter()
                .filter(|shot| shot.outcome != Outcome::Miss)
                .map(|shot| shot.cell)
                .collect();
            let marked: CellSet = saved.marked.iter().copied().collect();
            Ok(Side {
                player: saved.player,
                fleet,
                commitment: saved.commitment.clone(),
                salt: saved.salt.clone(),
                shots,
                known: shot_cells.union(marked),
                marked,
                hits,
                sunk: saved.sunk.clone(),
                reactions: saved.reactions,
                next_reaction_at: saved.next_reaction_at,
                placement_moves: saved.placement_moves,
            })
        };
        Ok(Match {
            rules: snapshot.rules,
            ranked: snapshot.ranked,
            phase: snapshot.phase,
            sides: [side(&snapshot.sides[0])?, side(&snapshot.sides[1])?],
            invited: snapshot.invited,
            turn: snapshot.turn,
            deadline: snapshot.deadline,
            result: snapshot.result,
            version: snapshot.version,
            clock_extensions: snapshot.clock_extensions,
        })
    }
}
