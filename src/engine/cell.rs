//! Cells, orientations and ship placements on the 10 × 10 sea, and the bit masks behind them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::Refusal;

/// Columns and rows on every sea.
pub const BOARD_SIZE: u8 = 10;
const COLUMN_LETTERS: &[u8; 10] = b"ABCDEFGHIJ";

/// One cell of a sea, 0-based `(col, row)` inside; `A1`…`J10` outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    col: u8,
    row: u8,
}

impl Cell {
    /// A cell from 0-based coordinates, or `None` off the board.
    pub fn new(col: u8, row: u8) -> Option<Self> {
        (col < BOARD_SIZE && row < BOARD_SIZE).then_some(Self { col, row })
    }

    pub fn col(self) -> u8 {
        self.col
    }

    pub fn row(self) -> u8 {
        self.row
    }

    /// Position in a [`CellSet`]: row-major.
    pub fn index(self) -> u32 {
        u32::from(self.row) * u32::from(BOARD_SIZE) + u32::from(self.col)
    }

    fn from_index(index: u32) -> Self {
        // Only called with indices below 100, so both fit in u8.
        Self {
            col: (index % u32::from(BOARD_SIZE)) as u8,
            row: (index / u32::from(BOARD_SIZE)) as u8,
        }
    }

    /// Every cell of the board, row by row.
    pub fn all() -> impl Iterator<Item = Cell> {
        (0..u32::from(BOARD_SIZE) * u32::from(BOARD_SIZE)).map(Cell::from_index)
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}",
            char::from(COLUMN_LETTERS[usize::from(self.col)]),
            self.row + 1
        )
    }
}

impl FromStr for Cell {
    type Err = Refusal;

    /// Accepts `A1`…`J10`, letters in either case. A well-formed name outside the board
    /// (`K1`, `A11`, `A0`) is `OffBoard`; anything else is `InvalidCell`.
    fn from_str(text: &str) -> Result<Self, Refusal> {
        let invalid = || Refusal::InvalidCell(text.chars().take(16).collect());
        let mut chars = text.chars();
        let letter = chars.next().ok_or_else(invalid)?;
        if !letter.is_ascii_alphabetic() {
            return Err(invalid());
        }
        let digits = chars.as_str();
        if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        if digits.len() > 1 && digits.starts_with('0') {
            return Err(invalid());
        }
        let row: u32 = digits.parse().map_err(|_| invalid())?;
        let col = u32::from(letter.to_ascii_uppercase() as u8 - b'A');
        if row == 0 || row > u32::from(BOARD_SIZE) || col >= u32::from(BOARD_SIZE) {
            return Err(Refusal::OffBoard);
        }
        Ok(Cell::from_index((row - 1) * u32::from(BOARD_SIZE) + col))
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cell {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse()
            .map_err(|refusal: Refusal| serde::de::Error::custom(refusal))
    }
}

/// Which way a ship extends from its bow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Orientation {
    /// Bow is the leftmost cell; the ship extends to the right.
    Horizontal,
    /// Bow is the topmost cell; the ship extends downwards.
    Vertical,
}

impl Orientation {
    pub const BOTH: [Orientation; 2] = [Orientation::Horizontal, Orientation::Vertical];

    /// One letter, as used in the commitment encoding.
    pub fn letter(self) -> char {
        match self {
            Orientation::Horizontal => 'H',
            Orientation::Vertical => 'V',
        }
    }
}

/// Where a ship lies: its bow (top-left end) and orientation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    #[schema(value_type = String, example = "B3")]
    pub cell: Cell,
    pub orientation: Orientation,
}

impl Placement {
    /// The cells a ship of `length` covers here, or `OffBoard` when any falls outside.
    pub fn cells(self, length: u8) -> Result<CellSet, Refusal> {
        let (end_col, end_row) = match self.orientation {
            Orientation::Horizontal => (self.cell.col + length - 1, self.cell.row),
            Orientation::Vertical => (self.cell.col, self.cell.row + length - 1),
        };
        if end_col >= BOARD_SIZE || end_row >= BOARD_SIZE {
            return Err(Refusal::OffBoard);
        }
        let step = match self.orientation {
            Orientation::Horizontal => 1,
            Orientation::Vertical => u32::from(BOARD_SIZE),
        };
        let mut set = CellSet::EMPTY;
        for offset in 0..u32::from(length) {
            set.0 |= 1u128 << (self.cell.index() + offset * step);
        }
        Ok(set)
    }
}

/// A set of cells as a 100-bit mask: placement, shot and redaction checks are single
/// bit operations, which keeps a shot well under a microsecond.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CellSet(u128);

const BOARD_MASK: u128 = (1u128 << 100) - 1;
const COLUMN_A: u128 = {
    let mut mask = 0u128;
    let mut row = 0;
    while row < 10 {
        mask |= 1u128 << (row * 10);
        row += 1;
    }
    mask
};
const COLUMN_J: u128 = COLUMN_A << 9;

/// Columns `0..=BOARD_SIZE - length` of every row: where a horizontal ship may start.
fn horizontal_bows(length: u8) -> u128 {
    let mut mask = 0u128;
    for col in 0..=(BOARD_SIZE - length) {
        mask |= COLUMN_A << col;
    }
    mask
}

impl CellSet {
    pub const EMPTY: CellSet = CellSet(0);

    pub fn single(cell: Cell) -> Self {
        CellSet(1u128 << cell.index())
    }

    pub fn contains(self, cell: Cell) -> bool {
        self.0 & (1u128 << cell.index()) != 0
    }

    pub fn insert(&mut self, cell: Cell) {
        self.0 |= 1u128 << cell.index();
    }

    pub fn union(self, other: CellSet) -> CellSet {
        CellSet(self.0 | other.0)
    }

    pub fn intersects(self, other: CellSet) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_subset_of(self, other: CellSet) -> bool {
        self.0 & !other.0 == 0
    }

    pub fn intersection(self, other: CellSet) -> CellSet {
        CellSet(self.0 & other.0)
    }

    pub fn minus(self, other: CellSet) -> CellSet {
        CellSet(self.0 & !other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// The set grown by one cell in all eight directions (the ring a no-touch rule
    /// keeps clear, diagonals included), clipped to the board.
    pub fn dilated(self) -> CellSet {
        let horizontal = self.0 | ((self.0 & !COLUMN_J) << 1) | ((self.0 & !COLUMN_A) >> 1);
        let grown = horizontal | (horizontal << 10) | (horizontal >> 10);
        CellSet(grown & BOARD_MASK)
    }

    /// The bow cells from which a ship of `length` lying in `orientation` stays on the board
    /// and inside this set: one shift-and-mask per ship cell instead of a check per bow.
    pub fn bows_within(self, length: u8, orientation: Orientation) -> CellSet {
        if length == 0 || length > BOARD_SIZE {
            return CellSet::EMPTY;
        }
        let inside = self.0 & BOARD_MASK;
        let (step, bows) = match orientation {
            // A horizontal bow must leave room in its own row: columns 0..=10 - length.
            Orientation::Horizontal => (1, horizontal_bows(length)),
            // Cells past the last row are outside the set, so shifting ends the ship there.
            Orientation::Vertical => (u32::from(BOARD_SIZE), BOARD_MASK),
        };
        let mut fits = inside & bows;
        for offset in 1..u32::from(length) {
            fits &= inside >> (offset * step);
        }
        CellSet(fits)
    }

    /// Every cell of the board not in this set.
    pub fn complement(self) -> CellSet {
        CellSet(!self.0 & BOARD_MASK)
    }

    /// Cells in board order (row by row).
    pub fn iter(self) -> impl Iterator<Item = Cell> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let index = bits.trailing_zeros();
            bits &= bits - 1;
            Some(Cell::from_index(index))
        })
    }

    pub fn to_vec(self) -> Vec<Cell> {
        self.iter().collect()
    }
}

impl FromIterator<Cell> for CellSet {
    fn from_iter<I: IntoIterator<Item = Cell>>(iter: I) -> Self {
        let mut set = CellSet::EMPTY;
        for cell in iter {
            set.insert(cell);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(text: &str) -> Cell {
        text.parse().expect("valid cell")
    }

    #[test]
    fn parses_and_prints_every_cell_of_the_board() {
        for c in Cell::all() {
            assert_eq!(cell(&c.to_string()), c);
        }
        assert_eq!(cell("A1"), Cell::new(0, 0).expect("on board"));
        assert_eq!(cell("J10"), Cell::new(9, 9).expect("on board"));
        assert_eq!(cell("B3").to_string(), "B3");
    }

    #[test]
    fn accepts_lowercase_letters_and_prints_uppercase() {
        assert_eq!(cell("c7").to_string(), "C7");
    }

    #[test]
    fn refuses_cells_beyond_the_board_as_off_board() {
        for text in ["K1", "A11", "A0", "Z99", "J100"] {
            assert_eq!(text.parse::<Cell>(), Err(Refusal::OffBoard), "{text}");
        }
    }

    #[test]
    fn refuses_junk_as_an_invalid_cell() {
        for text in [
            "", "A", "1A", "AA1", "A-1", "A 1", "A1 ", "Ä1", "A1000", "A01x", "🚢",
        ] {
            assert!(
                matches!(text.parse::<Cell>(), Err(Refusal::InvalidCell(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn refuses_rows_with_leading_zeros() {
        for text in ["A01", "B007", "J010"] {
            assert!(
                matches!(text.parse::<Cell>(), Err(Refusal::InvalidCell(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn a_placement_off_the_board_is_refused() {
        let place = |c: &str, o| Placement {
            cell: cell(c),
            orientation: o,
        };
        assert_eq!(
            place("G1", Orientation::Horizontal).cells(5),
            Err(Refusal::OffBoard)
        );
        assert_eq!(
            place("A7", Orientation::Vertical).cells(5),
            Err(Refusal::OffBoard)
        );
        assert_eq!(
            place("F1", Orientation::Horizontal)
                .cells(5)
                .map(CellSet::len),
            Ok(5)
        );
        assert_eq!(
            place("A6", Orientation::Vertical)
                .cells(5)
                .map(CellSet::to_vec),
            Ok(vec![
                cell("A6"),
                cell("A7"),
                cell("A8"),
                cell("A9"),
                cell("A10")
            ])
        );
    }

    #[test]
    fn bows_within_a_set_are_the_bows_whose_whole_ship_lies_in_it() {
        let sets = [
            CellSet(BOARD_MASK),
            CellSet::EMPTY,
            CellSet::single(cell("C3")).dilated().complement(),
            ["A1", "B1", "C1", "J1", "A2", "J3", "J4", "E10", "F10"]
                .iter()
                .map(|c| cell(c))
                .collect(),
        ];
        for set in sets {
            for length in 1..=5 {
                for orientation in Orientation::BOTH {
                    let slow: CellSet = Cell::all()
                        .filter(|&c| {
                            Placement {
                                cell: c,
                                orientation,
                            }
                            .cells(length)
                            .is_ok_and(|ship| ship.is_subset_of(set))
                        })
                        .collect();
                    assert_eq!(
                        set.bows_within(length, orientation),
                        slow,
                        "{length} {orientation:?}"
                    );
                }
            }
        }
        assert_eq!(
            CellSet(BOARD_MASK)
                .bows_within(5, Orientation::Horizontal)
                .len(),
            60
        );
    }

    #[test]
    fn dilation_grows_by_one_in_eight_directions_without_wrapping() {
        let corner = CellSet::single(cell("J1")).dilated();
        assert_eq!(
            corner.to_vec(),
            vec![cell("I1"), cell("J1"), cell("I2"), cell("J2")]
        );
        let middle = CellSet::single(cell("E5")).dilated();
        assert_eq!(middle.len(), 9);
        assert!(!CellSet::single(cell("A2")).dilated().contains(cell("J1")));
        assert!(!CellSet::single(cell("J10")).dilated().contains(cell("A1")));
    }
}
