//! The rule-set presets as data: fleets, touching, extra shots, what a sink reveals, clocks.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::Refusal;

/// The named presets. Adding one is adding a variant and its [`RuleSet`] data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuleSetId {
    /// Polish "Statki": the service's default.
    Statki,
    /// Russian "Морской бой" / German "Schiffeversenken".
    Classic,
    /// Italian "Battaglia navale".
    Battaglia,
}

impl RuleSetId {
    pub const ALL: [RuleSetId; 3] = [RuleSetId::Statki, RuleSetId::Classic, RuleSetId::Battaglia];

    pub fn as_str(self) -> &'static str {
        match self {
            RuleSetId::Statki => "statki",
            RuleSetId::Classic => "classic",
            RuleSetId::Battaglia => "battaglia",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        RuleSetId::ALL.into_iter().find(|id| id.as_str() == text)
    }

    pub fn rules(self) -> &'static RuleSet {
        match self {
            RuleSetId::Statki => &STATKI,
            RuleSetId::Classic => &CLASSIC,
            RuleSetId::Battaglia => &BATTAGLIA,
        }
    }
}

/// One ship of a fleet, in placement order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShipClass {
    pub name: &'static str,
    pub length: u8,
}

/// What the shooter learns when a ship sinks, beyond `sunk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct SinkReveal {
    /// The sunk ship's cells (every preset).
    pub cells: bool,
    /// The ship's type name, e.g. "Portaerei".
    pub ship_type: bool,
    /// Every cell around the ship is marked known-empty for the shooter.
    pub mark_ring: bool,
}

/// A preset: everything that differs between the rulebooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct RuleSet {
    pub id: RuleSetId,
    pub title: &'static str,
    pub fleet: &'static [ShipClass],
    pub ships_may_touch: bool,
    /// Whether a hit or sink lets the same player shoot again, by default.
    pub extra_shot_on_hit: bool,
    /// Whether a lobby may switch `extra_shot_on_hit` on as an unranked house rule (a preset
    /// that shoots again after a hit anyway takes the option too, and changes nothing).
    pub extra_shot_option: bool,
    pub sink_reveals: SinkReveal,
}

/// The largest fleet of any preset (checked against every preset by a test below).
pub const FLEET_SHIPS_MAX: usize = 10;

const fn ship(name: &'static str, length: u8) -> ShipClass {
    ShipClass { name, length }
}

pub static STATKI: RuleSet = RuleSet {
    id: RuleSetId::Statki,
    title: "Statki",
    fleet: &[
        ship("Carrier", 5),
        ship("Battleship", 4),
        ship("Cruiser", 3),
        ship("Submarine", 3),
        ship("Destroyer", 2),
    ],
    ships_may_touch: true,
    extra_shot_on_hit: false,
    extra_shot_option: true,
    sink_reveals: SinkReveal {
        cells: true,
        ship_type: false,
        mark_ring: false,
    },
};

pub static CLASSIC: RuleSet = RuleSet {
    id: RuleSetId::Classic,
    title: "Морской бой / Schiffeversenken",
    fleet: &[
        ship("Battleship", 4),
        ship("Cruiser", 3),
        ship("Cruiser", 3),
        ship("Destroyer", 2),
        ship("Destroyer", 2),
        ship("Destroyer", 2),
        ship("Torpedo boat", 1),
        ship("Torpedo boat", 1),
        ship("Torpedo boat", 1),
        ship("Torpedo boat", 1),
    ],
    ships_may_touch: false,
    extra_shot_on_hit: true,
    extra_shot_option: false,
    sink_reveals: SinkReveal {
        cells: true,
        ship_type: false,
        mark_ring: true,
    },
};

pub static BATTAGLIA: RuleSet = RuleSet {
    id: RuleSetId::Battaglia,
    title: "Battaglia navale",
    fleet: &[
        ship("Portaerei", 5),
        ship("Corazzata", 4),
        ship("Incrociatore", 3),
        ship("Sottomarino", 3),
        ship("Cacciatorpediniere", 2),
        ship("Motovedetta", 1),
    ],
    ships_may_touch: false,
    extra_shot_on_hit: false,
    extra_shot_option: true,
    sink_reveals: SinkReveal {
        cells: true,
        ship_type: true,
        mark_ring: false,
    },
};

impl RuleSet {
    /// Cells a fleet covers: sinking this many wins.
    pub fn fleet_cells(&self) -> u32 {
        self.fleet.iter().map(|ship| u32::from(ship.length)).sum()
    }
}

/// House options a lobby may set. Any option that changes a preset's rules makes the
/// match unranked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HouseOptions {
    /// A hit or sink lets the shooter fire again: a house rule of any preset (`classic`
    /// plays so anyway, so there it changes nothing).
    #[serde(default)]
    pub extra_shot_on_hit: bool,
}

/// The clocks of one match, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Clock {
    /// Time both players share to place their fleets, from the second player's join.
    pub placement_seconds: u32,
    /// Time for every single shot, restarted after each shot.
    pub shot_seconds: u32,
}

impl Clock {
    pub const PLACEMENT_BOUNDS: (u32, u32) = (5, 600);
    pub const SHOT_BOUNDS: (u32, u32) = (2, 120);

    /// Checks a clock an unranked lobby asked for.
    pub fn validate(self) -> Result<Clock, Refusal> {
        let (pmin, pmax) = Self::PLACEMENT_BOUNDS;
        let (smin, smax) = Self::SHOT_BOUNDS;
        if !(pmin..=pmax).contains(&self.placement_seconds) {
            return Err(Refusal::InvalidOption(format!(
                "placement_seconds must be between {pmin} and {pmax}"
            )));
        }
        if !(smin..=smax).contains(&self.shot_seconds) {
            return Err(Refusal::InvalidOption(format!(
                "shot_seconds must be between {smin} and {smax}"
            )));
        }
        Ok(self)
    }
}

/// The rules one match is played by: a preset, its options and its clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MatchRules {
    pub ruleset: RuleSetId,
    pub options: HouseOptions,
    pub clock: Clock,
    /// Seconds an unjoined match waits before it is cancelled.
    pub join_seconds: u32,
}

impl MatchRules {
    /// Resolves a lobby's request. `extra_shot_on_hit` is a house rule of every preset, so
    /// the document's schema for it holds whatever the preset.
    pub fn new(
        ruleset: RuleSetId,
        options: HouseOptions,
        clock: Clock,
        join_seconds: u32,
    ) -> Result<Self, Refusal> {
        Ok(Self {
            ruleset,
            options,
            clock,
            join_seconds,
        })
    }

    pub fn preset(&self) -> &'static RuleSet {
        self.ruleset.rules()
    }

    pub fn extra_shot_on_hit(&self) -> bool {
        self.preset().extra_shot_on_hit || self.options.extra_shot_on_hit
    }

    /// The rules as played, for showing: the options state what holds in this match, the
    /// preset's own behaviour included (a `classic` match shoots again after a hit).
    pub fn effective(self) -> Self {
        Self {
            options: HouseOptions {
                extra_shot_on_hit: self.extra_shot_on_hit(),
            },
            ..self
        }
    }

    /// Whether anything departs from the preset's standard rules (clock aside).
    pub fn has_house_options(&self) -> bool {
        self.options != HouseOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_fleet_is_fleet_ships_max() {
        let largest = RuleSetId::ALL.iter().map(|id| id.rules().fleet.len()).max();
        assert_eq!(largest, Some(FLEET_SHIPS_MAX));
    }

    #[test]
    fn statki_fleet_is_five_four_three_three_two() {
        let lengths: Vec<u8> = STATKI.fleet.iter().map(|s| s.length).collect();
        assert_eq!(lengths, [5, 4, 3, 3, 2]);
        assert_eq!(STATKI.fleet_cells(), 17);
    }

    #[test]
    fn classic_fleet_is_ten_ships_of_twenty_cells() {
        assert_eq!(CLASSIC.fleet.len(), 10);
        assert_eq!(CLASSIC.fleet_cells(), 20);
    }

    #[test]
    fn battaglia_needs_all_18_cells() {
        assert_eq!(BATTAGLIA.fleet_cells(), 18);
        assert_eq!(BATTAGLIA.fleet.last().map(|s| s.name), Some("Motovedetta"));
    }

    #[test]
    fn the_extra_shot_is_a_house_rule_of_every_preset() {
        let clock = Clock {
            placement_seconds: 120,
            shot_seconds: 30,
        };
        let house = HouseOptions {
            extra_shot_on_hit: true,
        };
        for id in RuleSetId::ALL {
            let rules = MatchRules::new(id, house, clock, 900).expect("accepted");
            assert!(rules.extra_shot_on_hit(), "{id:?}");
        }
        // Offered where it changes something: not in classic, which shoots again anyway.
        assert!(STATKI.extra_shot_option && BATTAGLIA.extra_shot_option);
        assert!(!CLASSIC.extra_shot_option && CLASSIC.extra_shot_on_hit);
    }

    #[test]
    fn clocks_outside_the_bounds_are_refused() {
        let clock = |p, s| Clock {
            placement_seconds: p,
            shot_seconds: s,
        };
        assert!(clock(5, 2).validate().is_ok());
        assert!(clock(600, 120).validate().is_ok());
        assert!(clock(4, 30).validate().is_err());
        assert!(clock(120, 121).validate().is_err());
    }
}
