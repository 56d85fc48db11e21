//! Fleet commitments: a salted SHA-256 of the fleet, public during the battle, opened after.
//!
//! The committed message is the UTF-8 text
//!
//! ```text
//! statki-fleet-v1|<ruleset>|<salt>|<ship 0>,<ship 1>,…
//! ```
//!
//! where `<ruleset>` is the preset id (`statki`, `classic`, `battaglia`), `<salt>` is the
//! 16 random bytes as 32 lowercase hex digits, and each ship, in fleet order, is its bow
//! cell followed by `H` (horizontal) or `V` (vertical), e.g. `A1H`. The commitment is the
//! SHA-256 of that text as 64 lowercase hex digits. With a shell:
//! `printf '%s' 'statki-fleet-v1|statki|00…ff|A1H,A2H,A3H,A4H,A5H' | sha256sum`.

use sha2::{Digest, Sha256};

use super::cell::Placement;
use super::ruleset::RuleSetId;

/// The exact text a commitment hashes.
pub fn canonical_text(ruleset: RuleSetId, salt_hex: &str, fleet: &[Placement]) -> String {
    let ships: Vec<String> = fleet
        .iter()
        .map(|ship| format!("{}{}", ship.cell, ship.orientation.letter()))
        .collect();
    format!(
        "statki-fleet-v1|{}|{}|{}",
        ruleset.as_str(),
        salt_hex,
        ships.join(",")
    )
}

/// The commitment to `fleet` under `salt_hex`.
pub fn commitment(ruleset: RuleSetId, salt_hex: &str, fleet: &[Placement]) -> String {
    hex::encode(Sha256::digest(
        canonical_text(ruleset, salt_hex, fleet).as_bytes(),
    ))
}

/// Whether an opened fleet and salt match a published commitment.
pub fn verify(ruleset: RuleSetId, salt_hex: &str, fleet: &[Placement], published: &str) -> bool {
    commitment(ruleset, salt_hex, fleet) == published
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cell::Orientation;

    fn fleet() -> Vec<Placement> {
        ["A1", "A2", "A3", "A4", "A5"]
            .iter()
            .map(|c| Placement {
                cell: c.parse().expect("valid cell"),
                orientation: Orientation::Horizontal,
            })
            .collect()
    }

    #[test]
    fn the_commitment_hashes_the_documented_text() {
        let salt = "000102030405060708090a0b0c0d0e0f";
        assert_eq!(
            canonical_text(RuleSetId::Statki, salt, &fleet()),
            "statki-fleet-v1|statki|000102030405060708090a0b0c0d0e0f|A1H,A2H,A3H,A4H,A5H"
        );
        // Computed independently with `printf '%s' '…' | sha256sum`.
        assert_eq!(
            commitment(RuleSetId::Statki, salt, &fleet()),
            "7f73a226d6008b4c6be58cc325b1d73e7f22b4c3e147fbce82e6a7db0414af14"
        );
    }

    #[test]
    fn a_moved_ship_or_another_salt_fails_verification() {
        let salt = "000102030405060708090a0b0c0d0e0f";
        let published = commitment(RuleSetId::Statki, salt, &fleet());
        assert!(verify(RuleSetId::Statki, salt, &fleet(), &published));
        let mut moved = fleet();
        moved[4].orientation = Orientation::Vertical;
        assert!(!verify(RuleSetId::Statki, salt, &moved, &published));
        assert!(!verify(RuleSetId::Statki, "ff", &fleet(), &published));
    }
}
