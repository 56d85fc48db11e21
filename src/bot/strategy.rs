//! The three levels' shot choices. Each picks only among [`Sea::candidates`]: untried cells
//! some remaining ship may still cover, so no level wastes a shot the rules prove empty.

use rand::Rng;
use rand::seq::IteratorRandom;

use super::Level;
use super::sea::Sea;
use crate::engine::{BOARD_SIZE, Cell, CellSet, MatchView};

/// How much more a position counts for each open hit it covers, in the hard level's
/// density: positions through hits are where the next ship cell almost surely is.
const HIT_WEIGHT: u64 = 64;

/// The cell `level` fires at next, from the shooter's own view; `None` when the view is a
/// spectator's or no cell is left to shoot.
pub fn choose_shot(level: Level, view: &MatchView, rng: &mut impl Rng) -> Option<Cell> {
    let sea = Sea::from_view(view)?;
    choose_on(level, &sea, rng)
}

/// The same choice on an already derived [`Sea`].
pub fn choose_on(level: Level, sea: &Sea, rng: &mut impl Rng) -> Option<Cell> {
    let candidates = sea.candidates();
    if candidates.is_empty() {
        // Only an inconsistent view can get here; any cell the engine accepts will do.
        return pick(sea.untried(), rng);
    }
    match level {
        Level::Easy => pick(candidates, rng),
        Level::Medium => medium(sea, candidates, rng),
        Level::Hard => hard(sea, candidates, rng),
    }
}

fn pick(cells: CellSet, rng: &mut impl Rng) -> Option<Cell> {
    cells.iter().choose(rng)
}

fn neighbour(cell: Cell, dcol: i8, drow: i8) -> Option<Cell> {
    let col = cell.col().checked_add_signed(dcol)?;
    let row = cell.row().checked_add_signed(drow)?;
    Cell::new(col, row)
}

const STEPS: [(i8, i8); 4] = [(1, 0), (-1, 0), (0, 1), (0, -1)];

/// Hunt and target: with open hits, extend a line of two or more hits at its ends, else try
/// around a single hit; without, shoot a lattice every remaining ship must cross.
fn medium(sea: &Sea, candidates: CellSet, rng: &mut impl Rng) -> Option<Cell> {
    if !sea.open_hits.is_empty() {
        let mut line_ends = CellSet::EMPTY;
        let mut around = CellSet::EMPTY;
        for hit in sea.open_hits.iter() {
            for (dcol, drow) in STEPS {
                let Some(next) = neighbour(hit, dcol, drow) else {
                    continue;
                };
                around.insert(next);
                // `hit` continues a line of hits from the opposite side: `next` extends it.
                let behind = neighbour(hit, -dcol, -drow);
                if behind.is_some_and(|behind| sea.open_hits.contains(behind)) {
                    line_ends.insert(next);
                }
            }
        }
        for preferred in [line_ends, around] {
            if let Some(cell) = pick(preferred.intersection(candidates), rng) {
                return Some(cell);
            }
        }
    }
    pick(lattice(sea).intersection(candidates), rng).or_else(|| pick(candidates, rng))
}

/// Cells with `(col + row) % n == 0` for the shortest remaining length `n`: every straight
/// run of `n` cells holds exactly one, so every remaining ship crosses the lattice.
fn lattice(sea: &Sea) -> CellSet {
    let shortest = sea.remaining.iter().copied().min().unwrap_or(1).max(1);
    Cell::all()
        .filter(|cell| (cell.col() + cell.row()) % shortest == 0)
        .collect()
}

/// Probability density: count, for every candidate, the legal positions of the remaining
/// ships through it (each weighted by [`HIT_WEIGHT`] per open hit it covers; with open
/// hits, only positions through one count), and shoot at random among the densest.
fn hard(sea: &Sea, candidates: CellSet, rng: &mut impl Rng) -> Option<Cell> {
    let mut density = [0u64; (BOARD_SIZE as usize) * (BOARD_SIZE as usize)];
    let targeting = !sea.open_hits.is_empty();
    let mut top = accumulate(sea, candidates, targeting, &mut density);
    if top == 0 {
        // Open hits no single position explains (ships touching in a line): hunt instead.
        top = accumulate(sea, candidates, false, &mut density);
    }
    let densest: CellSet = candidates
        .iter()
        .filter(|cell| density[cell.index() as usize] == top)
        .collect();
    pick(densest, rng)
}

/// Adds every counted position to `density`; returns the highest density of a candidate.
fn accumulate(sea: &Sea, candidates: CellSet, only_through_hits: bool, density: &mut [u64]) -> u64 {
    for &length in &sea.remaining {
        for position in sea.positions(length) {
            let covered = position.cells.intersection(sea.open_hits).len();
            if only_through_hits && covered == 0 {
                continue;
            }
            let weight = HIT_WEIGHT.saturating_pow(covered);
            for cell in position.cells.intersection(candidates).iter() {
                density[cell.index() as usize] += weight;
            }
        }
    }
    candidates
        .iter()
        .map(|cell| density[cell.index() as usize])
        .max()
        .unwrap_or(0)
}
