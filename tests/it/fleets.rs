//! A legal fleet of every preset, for the integration tests and the load generators alike.

use serde_json::{Value, json};

/// The bow of each ship of `ruleset`'s fleet in placement order, and its length: all
/// horizontal, kept apart for the no-touch presets.
fn bows(ruleset: &str) -> (&'static [&'static str], &'static [u8]) {
    match ruleset {
        "classic" => (
            &["A1", "F1", "A3", "E3", "I3", "A5", "D5", "F5", "H5", "J5"],
            &[4, 3, 3, 2, 2, 2, 1, 1, 1, 1],
        ),
        "battaglia" => (&["A1", "A3", "A5", "A7", "A9", "J10"], &[5, 4, 3, 3, 2, 1]),
        _ => (&["A1", "A3", "A5", "A7", "A9"], &[5, 4, 3, 3, 2]),
    }
}

/// A legal fleet for each preset, as `PUT /v1/matches/{id}/fleet` takes it.
pub fn legal_fleet(ruleset: &str) -> Value {
    let ships: Vec<Value> = bows(ruleset)
        .0
        .iter()
        .map(|bow| json!({ "cell": bow, "orientation": "horizontal" }))
        .collect();
    json!({ "ships": ships })
}

/// The cells that fleet covers.
pub fn legal_fleet_cells(ruleset: &str) -> Vec<String> {
    let (bows, lengths) = bows(ruleset);
    let mut cells = Vec::new();
    for (bow, &length) in bows.iter().zip(lengths) {
        let column = bow.as_bytes()[0];
        let row = &bow[1..];
        for offset in 0..length {
            cells.push(format!("{}{row}", char::from(column + offset)));
        }
    }
    cells
}
