//! One player's fleet during placement and battle: slots, legality, hints, damage.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cell::{Cell, CellSet, Orientation, Placement};
use super::error::Refusal;
use super::ruleset::RuleSet;

/// A player's fleet: one slot per ship of the preset, in fleet order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fleet {
    rules: &'static RuleSet,
    slots: Vec<Option<PlacedShip>>,
    locked: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacedShip {
    pub placement: Placement,
    pub cells: CellSet,
}

/// Legal bow cells for the next ship, per orientation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlacementHints {
    #[schema(value_type = Vec<String>)]
    pub horizontal: Vec<Cell>,
    #[schema(value_type = Vec<String>)]
    pub vertical: Vec<Cell>,
}

impl Fleet {
    pub fn new(rules: &'static RuleSet) -> Self {
        Self {
            rules,
            slots: vec![None; rules.fleet.len()],
            locked: false,
        }
    }

    pub fn is_locked(&self) -> bool {
        self.locked
    }

    pub fn lock(&mut self) {
        self.locked = true;
    }

    pub fn slots(&self) -> &[Option<PlacedShip>] {
        &self.slots
    }

    pub fn is_complete(&self) -> bool {
        self.slots.iter().all(Option::is_some)
    }

    /// The first unplaced ship in fleet order: the one the client is asked for.
    pub fn next_ship(&self) -> Option<usize> {
        if self.locked {
            return None;
        }
        self.slots.iter().position(Option::is_none)
    }

    /// Every cell the fleet covers.
    pub fn occupied(&self) -> CellSet {
        self.occupied_except(usize::MAX)
    }

    fn occupied_except(&self, skip: usize) -> CellSet {
        self.slots
            .iter()
            .enumerate()
            .filter(|(index, _)| *index != skip)
            .filter_map(|(_, slot)| slot.map(|ship| ship.cells))
            .fold(CellSet::EMPTY, CellSet::union)
    }

    pub fn check_index(&self, index: usize) -> Result<(), Refusal> {
        if index < self.slots.len() {
            Ok(())
        } else {
            Err(Refusal::UnknownShip {
                index,
                fleet_size: self.slots.len(),
            })
        }
    }

    /// Whether ship `index` may lie at `placement` given every other placed ship (its own
    /// current position is ignored, so this also checks a move).
    pub fn check_placement(&self, index: usize, placement: Placement) -> Result<CellSet, Refusal> {
        self.check_index(index)?;
        let cells = placement.cells(self.rules.fleet[index].length)?;
        check_against(self.rules, cells, self.occupied_except(index))?;
        Ok(cells)
    }

    /// Puts ship `index` at a checked position.
    pub fn set(&mut self, index: usize, placement: Placement, cells: CellSet) {
        self.slots[index] = Some(PlacedShip { placement, cells });
    }

    pub fn clear(&mut self, index: usize) {
        self.slots[index] = None;
    }

    /// Checks a whole fleet at once, in order, returning each ship's cells.
    pub fn check_whole(
        rules: &'static RuleSet,
        placements: &[Placement],
    ) -> Result<Vec<CellSet>, Refusal> {
        if placements.len() != rules.fleet.len() {
            return Err(Refusal::WrongFleetSize {
                expected: rules.fleet.len(),
                got: placements.len(),
            });
        }
        let mut occupied = CellSet::EMPTY;
        let mut all = Vec::with_capacity(placements.len());
        for (ship, placement) in rules.fleet.iter().zip(placements) {
            let cells = placement.cells(ship.length)?;
            check_against(rules, cells, occupied)?;
            occupied = occupied.union(cells);
            all.push(cells);
        }
        Ok(all)
    }

    /// Bow cells where the next ship could be placed now, per orientation.
    pub fn hints(&self) -> Option<PlacementHints> {
        let index = self.next_ship()?;
        let occupied = self.occupied_except(index);
        let length = self.rules.fleet[index].length;
        // The ship may cover neither another ship nor, without touching, any cell around one
        // (a ship touches another exactly when it covers a cell of the other's dilation).
        let blocked = if self.rules.ships_may_touch {
            occupied
        } else {
            occupied.dilated()
        };
        let open = blocked.complement();
        let legal = |orientation| open.bows_within(length, orientation).to_vec();
        Some(PlacementHints {
            horizontal: legal(Orientation::Horizontal),
            vertical: legal(Orientation::Vertical),
        })
    }

    /// The ship covering `cell`, if any.
    pub fn ship_at(&self, cell: Cell) -> Option<usize> {
        self.slots
            .iter()
            .position(|slot| slot.is_some_and(|ship| ship.cells.contains(cell)))
    }

    pub fn ship_cells(&self, index: usize) -> CellSet {
        self.slots
            .get(index)
            .copied()
            .flatten()
            .map_or(CellSet::EMPTY, |ship| ship.cells)
    }

    pub fn placements(&self) -> Vec<Option<Placement>> {
        self.slots
            .iter()
            .map(|slot| slot.map(|ship| ship.placement))
            .collect()
    }
}

fn check_against(rules: &RuleSet, cells: CellSet, others: CellSet) -> Result<(), Refusal> {
    if cells.intersects(others) {
        return Err(Refusal::Overlap);
    }
    if !rules.ships_may_touch && cells.dilated().intersects(others) {
        return Err(Refusal::ShipsTouching);
    }
    Ok(())
}
