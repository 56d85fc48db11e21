//! What a bot's view proves about the opponent's sea: which cells were tried, which hits
//! belong to ships still afloat, which cells can hold no ship, and which ships remain.
//!
//! A cell is a *candidate* when some remaining ship has a legal position through it given
//! everything seen: misses, hits, sunk ships (and, in no-touching presets, the empty ring
//! around them and the diagonal neighbours of hits), cells marked empty by the preset. Every
//! other untried cell is proven empty by the rules, and no level ever shoots one.

use std::sync::OnceLock;

use crate::engine::{
    BOARD_SIZE, Cell, CellSet, MatchView, Orientation, Outcome, Placement, RuleSet,
};

/// The longest ship any preset has; positions are tabled up to this length.
const MAX_LENGTH: usize = BOARD_SIZE as usize;

/// A ship position as bit masks: its cells, and its cells grown by one in all directions.
#[derive(Clone, Copy, Debug)]
pub struct Position {
    pub cells: CellSet,
    pub ring: CellSet,
}

/// Every on-board position of a ship of each length, built once.
fn positions(length: u8) -> &'static [Position] {
    static TABLE: OnceLock<Vec<Vec<Position>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..=MAX_LENGTH as u8)
            .map(|length| {
                if length == 0 {
                    return Vec::new();
                }
                Cell::all()
                    .flat_map(|cell| {
                        Orientation::BOTH
                            .into_iter()
                            .filter_map(move |orientation| {
                                // A one-cell ship has one position per cell, not two.
                                if length == 1 && orientation == Orientation::Vertical {
                                    return None;
                                }
                                let cells = Placement { cell, orientation }.cells(length).ok()?;
                                Some(Position {
                                    cells,
                                    ring: cells.dilated(),
                                })
                            })
                    })
                    .collect()
            })
            .collect()
    });
    table
        .get(usize::from(length))
        .map_or(&[][..], Vec::as_slice)
}

/// The opponent's sea as one player knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sea {
    pub rules: &'static RuleSet,
    /// Cells the engine would refuse as already known: shot, or marked empty.
    pub tried: CellSet,
    /// Hit cells of ships not yet sunk.
    pub open_hits: CellSet,
    /// Cells no remaining ship may cover: misses, marks, sunk ships and, without touching,
    /// every cell next to a sunk ship.
    pub blocked: CellSet,
    /// Lengths of the ships still afloat, longest first.
    pub remaining: Vec<u8>,
}

impl Sea {
    /// The opponent's sea as `view` shows it to its participant; `None` for a spectator.
    pub fn from_view(view: &MatchView) -> Option<Sea> {
        let participant = view.participant.as_ref()?;
        let rules = view.rules.preset();
        let mut tried = CellSet::EMPTY;
        let mut hits = CellSet::EMPTY;
        let mut misses = CellSet::EMPTY;
        for shot in &participant.shots {
            tried.insert(shot.cell);
            match shot.outcome {
                Outcome::Miss => misses.insert(shot.cell),
                Outcome::Hit | Outcome::Sunk => hits.insert(shot.cell),
            }
        }
        let marked: CellSet = participant.marked.iter().copied().collect();
        tried = tried.union(marked);
        let mut remaining: Vec<u8> = rules.fleet.iter().map(|ship| ship.length).collect();
        let mut sunk = CellSet::EMPTY;
        for ship in &participant.sunk {
            let cells: CellSet = ship.cells.iter().copied().collect();
            sunk = sunk.union(cells);
            // Ships of one length are interchangeable for what remains to be found.
            if let Some(at) = remaining
                .iter()
                .position(|&length| u32::from(length) == cells.len())
            {
                remaining.remove(at);
            }
        }
        remaining.sort_unstable_by(|a, b| b.cmp(a));
        let around_sunk = if rules.ships_may_touch {
            CellSet::EMPTY
        } else {
            sunk.dilated()
        };
        Some(Sea {
            rules,
            tried,
            open_hits: hits.minus(sunk),
            blocked: misses.union(marked).union(sunk).union(around_sunk),
            remaining,
        })
    }

    /// Every legal position of a ship of `length` given what is known: it covers no blocked
    /// cell and, without touching, touches no open hit it does not cover (a hit next to a
    /// ship belongs to that ship, or the two ships would touch).
    pub fn positions(&self, length: u8) -> impl Iterator<Item = Position> + '_ {
        let touch = self.rules.ships_may_touch;
        positions(length).iter().copied().filter(move |position| {
            !position.cells.intersects(self.blocked)
                && (touch
                    || position
                        .ring
                        .intersection(self.open_hits)
                        .is_subset_of(position.cells))
        })
    }

    /// Distinct lengths still afloat.
    pub fn remaining_lengths(&self) -> impl Iterator<Item = u8> + '_ {
        let mut seen = 0u32;
        self.remaining.iter().copied().filter(move |&length| {
            let fresh = seen & (1 << length) == 0;
            seen |= 1 << length;
            fresh
        })
    }

    /// Untried cells some remaining ship may still cover: the only cells worth a shot.
    pub fn candidates(&self) -> CellSet {
        let reachable = self
            .remaining_lengths()
            .flat_map(|length| self.positions(length))
            .fold(CellSet::EMPTY, |all, position| all.union(position.cells));
        reachable.minus(self.tried)
    }

    /// Cells the engine would still accept a shot on.
    pub fn untried(&self) -> CellSet {
        self.tried.complement()
    }
}
