//! Helpers shared by the engine's integration tests: fixed players, a fixed clock, fleets
//! known to be legal in every preset, and a harness that checks `fold(log) == state` after
//! every accepted command and that a refused command leaves the state untouched.

use chrono::{DateTime, Duration, TimeZone, Utc};
use statki::engine::{
    Cell, Clock, Command, Draw, Event, HouseOptions, Match, MatchRules, Orientation, Placement,
    Refusal, RuleSetId,
};
use uuid::Uuid;

pub const CREATOR: Uuid = Uuid::from_u128(0xC0FFEE);
pub const JOINER: Uuid = Uuid::from_u128(0x101E);
pub const STRANGER: Uuid = Uuid::from_u128(0x5757);

pub const CLOCK: Clock = Clock {
    placement_seconds: 120,
    shot_seconds: 30,
};
pub const JOIN_SECONDS: u32 = 900;

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .expect("a valid fixed time")
}

/// `t0` plus `seconds`.
pub fn at(seconds: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(seconds)
}

pub fn rules(id: RuleSetId) -> MatchRules {
    MatchRules::new(id, HouseOptions::default(), CLOCK, JOIN_SECONDS).expect("standard rules")
}

pub fn rules_with_extra_shot(id: RuleSetId) -> MatchRules {
    MatchRules::new(
        id,
        HouseOptions {
            extra_shot_on_hit: true,
        },
        CLOCK,
        JOIN_SECONDS,
    )
    .expect("a preset with the extra-shot option")
}

pub fn draw(coin: bool) -> Draw {
    Draw {
        coin,
        salt: [0x5a; 16],
    }
}

pub fn cell(text: &str) -> Cell {
    text.parse().expect("a valid cell name")
}

pub fn h(text: &str) -> Placement {
    Placement {
        cell: cell(text),
        orientation: Orientation::Horizontal,
    }
}

pub fn v(text: &str) -> Placement {
    Placement {
        cell: cell(text),
        orientation: Orientation::Vertical,
    }
}

/// A fleet of horizontal ships on rows 1, 3, 5, …: legal in every preset (nothing touches).
pub fn creator_fleet(id: RuleSetId) -> Vec<Placement> {
    match id {
        RuleSetId::Statki => vec![h("A1"), h("A3"), h("A5"), h("A7"), h("A9")],
        RuleSetId::Classic => vec![
            h("A1"),
            h("F1"),
            h("A3"),
            h("E3"),
            h("H3"),
            h("A5"),
            h("D5"),
            h("F5"),
            h("H5"),
            h("J5"),
        ],
        RuleSetId::Battaglia => vec![h("A1"), h("A3"), h("A5"), h("A7"), h("A9"), h("J10")],
    }
}

/// A fleet of vertical ships in columns A, C, E, …: legal in every preset, and different
/// from [`creator_fleet`] so views can tell whose fleet they show.
pub fn joiner_fleet(id: RuleSetId) -> Vec<Placement> {
    match id {
        RuleSetId::Statki => vec![v("A1"), v("C1"), v("E1"), v("G1"), v("I1")],
        RuleSetId::Classic => vec![
            v("A1"),
            v("C1"),
            v("E1"),
            v("G1"),
            v("I1"),
            v("A6"),
            v("C6"),
            v("E6"),
            v("G6"),
            v("I6"),
        ],
        RuleSetId::Battaglia => vec![v("A1"), v("C1"), v("E1"), v("G1"), v("I1"), v("J10")],
    }
}

pub fn fleet_for(player: Uuid, id: RuleSetId) -> Vec<Placement> {
    if player == CREATOR {
        creator_fleet(id)
    } else {
        joiner_fleet(id)
    }
}

/// The cells of each ship of `fleet` under preset `id`, in fleet order.
pub fn ship_cells(id: RuleSetId, fleet: &[Placement]) -> Vec<Vec<Cell>> {
    id.rules()
        .fleet
        .iter()
        .zip(fleet)
        .map(|(class, placement)| {
            placement
                .cells(class.length)
                .expect("a ship on the board")
                .to_vec()
        })
        .collect()
}

/// A match with its event log, checked after every step.
#[derive(Clone, Debug)]
pub struct Game {
    pub state: Match,
    pub log: Vec<Event>,
    pub now: DateTime<Utc>,
}

impl Game {
    pub fn create(rules: MatchRules, opponent: Option<Uuid>) -> Game {
        let created = Match::create(CREATOR, rules, false, opponent, t0()).expect("created");
        let log = vec![created];
        let state = Match::fold(&log).expect("a created match folds");
        Game {
            state,
            log,
            now: t0(),
        }
    }

    /// Created at `t0` and joined by [`JOINER`] at `t0`.
    pub fn joined(rules: MatchRules) -> Game {
        let mut game = Game::create(rules, None);
        game.exec(JOINER, &Command::Join);
        game
    }

    /// Both standard fleets placed at `t0`; `coin` picks the first shooter.
    pub fn in_battle(rules: MatchRules, coin: bool) -> Game {
        let mut game = Game::joined(rules);
        let id = rules.ruleset;
        game.exec(
            CREATOR,
            &Command::PlaceFleet {
                placements: creator_fleet(id),
            },
        );
        game.exec_with(
            JOINER,
            &Command::PlaceFleet {
                placements: joiner_fleet(id),
            },
            draw(coin),
        );
        game
    }

    pub fn try_exec(&mut self, actor: Uuid, command: &Command) -> Result<Vec<Event>, Refusal> {
        self.try_exec_with(actor, command, draw(false))
    }

    pub fn try_exec_with(
        &mut self,
        actor: Uuid,
        command: &Command,
        draw: Draw,
    ) -> Result<Vec<Event>, Refusal> {
        let before = self.state.clone();
        match self.state.execute(actor, command, self.now, draw) {
            Ok(events) => {
                self.log.extend(events.iter().cloned());
                self.check_fold();
                Ok(events)
            }
            Err(refusal) => {
                assert_eq!(
                    self.state, before,
                    "a refused {command:?} changed the match"
                );
                Err(refusal)
            }
        }
    }

    pub fn exec(&mut self, actor: Uuid, command: &Command) -> Vec<Event> {
        self.exec_with(actor, command, draw(false))
    }

    pub fn exec_with(&mut self, actor: Uuid, command: &Command, draw: Draw) -> Vec<Event> {
        self.try_exec_with(actor, command, draw)
            .unwrap_or_else(|refusal| panic!("{command:?} by {actor} refused: {refusal}"))
    }

    /// The refusal of `command`, checking the match did not change.
    pub fn refuse(&mut self, actor: Uuid, command: &Command) -> Refusal {
        match self.try_exec(actor, command) {
            Ok(events) => panic!("{command:?} by {actor} was accepted: {events:?}"),
            Err(refusal) => refusal,
        }
    }

    pub fn fire(&mut self, actor: Uuid, at_cell: &str) -> Vec<Event> {
        self.exec(
            actor,
            &Command::Fire {
                cell: cell(at_cell),
            },
        )
    }

    pub fn place(&mut self, actor: Uuid, index: usize, placement: Placement) -> Vec<Event> {
        self.exec(actor, &Command::PlaceShip { index, placement })
    }

    /// Runs `expire` at `now` and folds what it decides.
    pub fn expire(&mut self) -> Result<Vec<Event>, Refusal> {
        let before = self.state.clone();
        let result = self.state.expire(self.now);
        assert_eq!(
            self.state, before,
            "expire must not change the state itself"
        );
        if let Ok(events) = &result {
            self.apply(events);
        }
        result
    }

    /// Folds events decided elsewhere (expire, extend_clock) into the state and the log.
    pub fn apply(&mut self, events: &[Event]) {
        for event in events {
            self.state.evolve(event).expect("a decided event follows");
            self.log.push(event.clone());
        }
        self.check_fold();
    }

    pub fn check_fold(&self) {
        let folded = Match::fold(&self.log).expect("the log folds");
        assert_eq!(folded, self.state, "fold(log) differs from the state");
    }
}
