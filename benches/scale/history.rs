//! Years of play made by the engine, for the scale benchmark: a pool of games the bots play
//! to the end once, each replayed through `Match::execute` with fresh players, times, salts
//! and endings, and rated in order on the ladders as the service rates them.
//!
//! Replaying a game is the engine deciding every command again, so each match's log is
//! one the referee accepts (`statki verify` checks it like any other); replaying keeps the
//! cost per match to the engine's (tens of µs) instead of a bot's decision per shot.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use statki::app::ladder;
use statki::bot::Level;
use statki::bot::placement::random_fleet;
use statki::bot::strategy::choose_shot;
use statki::engine::{
    Cell, Clock, Command, Draw, Event, HouseOptions, Match, MatchRules, Phase, Placement, Rating,
    RuleSetId, Viewer,
};
use statki::names::PlayerName;
use statki::store::bulk::{LoadedMatch, LoadedStanding, numbered};
use uuid::Uuid;

/// One game as the bots played it: the rules, both fleets, the first shooter and every
/// shot in order with the seat that fired it.
struct Script {
    rules: MatchRules,
    fleets: [Vec<Placement>; 2],
    coin: bool,
    shots: Vec<(usize, Cell)>,
}

fn standard_rules(ruleset: RuleSetId) -> MatchRules {
    let clock = Clock {
        placement_seconds: 120,
        shot_seconds: 30,
    };
    MatchRules::new(ruleset, HouseOptions::default(), clock, 900).expect("preset rules")
}

/// Plays one game between two bots of random levels.
fn script(ruleset: RuleSetId, rng: &mut StdRng) -> Script {
    let rules = standard_rules(ruleset);
    let seats = [Uuid::from_u128(1), Uuid::from_u128(2)];
    let levels = [
        Level::ALL[rng.random_range(0..3)],
        Level::ALL[rng.random_range(0..3)],
    ];
    let now = DateTime::<Utc>::UNIX_EPOCH;
    let coin: bool = rng.random();
    let draw = Draw {
        coin,
        salt: [0; 16],
    };
    let created = Match::create(seats[0], rules, false, None, now).expect("created");
    let mut state = Match::fold([&created]).expect("folds");
    state
        .execute(seats[1], &Command::Join, now, draw)
        .expect("joined");
    let fleets = [
        random_fleet(rules.preset(), rng),
        random_fleet(rules.preset(), rng),
    ];
    for seat in 0..2 {
        let placements = fleets[seat].clone();
        state
            .execute(seats[seat], &Command::PlaceFleet { placements }, now, draw)
            .expect("placed");
    }
    let mut shots = Vec::new();
    while let (Phase::Battle, Some(seat)) = (state.phase, state.turn) {
        let view = state.view(Viewer::Player(seats[seat]));
        let cell = choose_shot(levels[seat], &view, rng).expect("a cell to shoot");
        state
            .execute(seats[seat], &Command::Fire { cell }, now, draw)
            .expect("a legal shot");
        shots.push((seat, cell));
    }
    Script {
        rules,
        fleets,
        coin,
        shots,
    }
}

/// A player's standing on one ladder while the history is made.
#[derive(Clone, Copy)]
struct Standing {
    rating: Rating,
    games: u32,
    wins: u32,
    losses: u32,
    draws: u32,
    updated_at: DateTime<Utc>,
}

/// Makes the history: `finished` matches between `players`, from `start` on, one every
/// `spacing`, in order of creation.
pub struct History {
    scripts: Vec<Script>,
    players: Vec<Uuid>,
    standings: HashMap<(usize, usize), Standing>,
    rng: StdRng,
    start: DateTime<Utc>,
    spacing: Duration,
    made: usize,
}

/// The share of matches that end otherwise than by sinking the whole fleet.
const RESIGNED: f64 = 0.07;
const TIMED_OUT: f64 = 0.03;
/// The share of matches that are ranked.
const RANKED: f64 = 0.5;

impl History {
    pub fn new(
        players: Vec<Uuid>,
        scripts_per_preset: usize,
        seed: u64,
        start: DateTime<Utc>,
        spacing: Duration,
    ) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let scripts = RuleSetId::ALL
            .iter()
            .flat_map(|&ruleset| std::iter::repeat_n(ruleset, scripts_per_preset))
            .map(|ruleset| script(ruleset, &mut rng))
            .collect();
        History {
            scripts,
            players,
            standings: HashMap::new(),
            rng,
            start,
            spacing,
            made: 0,
        }
    }

    /// A player, the first ones far more often: a few regulars with tens of thousands of
    /// matches, most players with a handful (a player's index is the cube of a uniform draw).
    fn pick_player(&mut self) -> usize {
        let u: f64 = self.rng.random();
        ((u * u * u) * self.players.len() as f64) as usize % self.players.len()
    }

    fn pick_pair(&mut self) -> (usize, usize) {
        let first = self.pick_player();
        loop {
            let second = self.pick_player();
            if second != first {
                return (first, second);
            }
        }
    }

    /// The next `count` matches of the history, in order of creation.
    pub fn next_chunk(&mut self, count: usize) -> Vec<LoadedMatch> {
        (0..count).map(|_| self.next_match()).collect()
    }

    fn next_match(&mut self) -> LoadedMatch {
        let n = self.made;
        self.made += 1;
        let script = &self.scripts[self.rng.random_range(0..self.scripts.len())];
        let rules = script.rules;
        let coin = script.coin;
        let fleets = script.fleets.clone();
        let shots = script.shots.clone();
        let (first, second) = self.pick_pair();
        let seats = [self.players[first], self.players[second]];
        let ranked = self.rng.random_bool(RANKED);
        let created_at = self.start
            + self.spacing * i32::try_from(n).expect("fewer than 2^31 matches")
            + Duration::milliseconds(self.rng.random_range(0..1000));
        let id = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            u64::try_from(created_at.timestamp()).expect("after 1970"),
            created_at.timestamp_subsec_nanos(),
        ));
        let mut now = created_at;
        let created = Match::create(seats[0], rules, ranked, None, now).expect("created");
        let mut state = Match::fold([&created]).expect("folds");
        let mut log = vec![(now, created)];
        let run = |state: &mut Match, now, actor, command: Command, rng: &mut StdRng| {
            let draw = Draw {
                coin,
                salt: rng.random(),
            };
            let events = state
                .execute(actor, &command, now, draw)
                .expect("a legal replay");
            events.into_iter().map(move |event| (now, event))
        };
        now += Duration::seconds(self.rng.random_range(5..120));
        log.extend(run(&mut state, now, seats[1], Command::Join, &mut self.rng));
        for seat in 0..2 {
            now += Duration::seconds(self.rng.random_range(5..60));
            let command = Command::PlaceFleet {
                placements: fleets[seat].clone(),
            };
            log.extend(run(&mut state, now, seats[seat], command, &mut self.rng));
        }
        let ending: f64 = self.rng.random();
        let cut = self.rng.random_range(0..shots.len().max(1));
        for (at, &(seat, cell)) in shots.iter().enumerate() {
            if at == cut && ending < RESIGNED {
                now += Duration::seconds(self.rng.random_range(2..20));
                let quitter = seats[self.rng.random_range(0..2)];
                log.extend(run(
                    &mut state,
                    now,
                    quitter,
                    Command::Resign,
                    &mut self.rng,
                ));
                break;
            }
            if at == cut && ending < RESIGNED + TIMED_OUT {
                now = state.deadline.expect("a running clock") + Duration::seconds(1);
                let expired = state.expire(now).expect("the clock ran out");
                state.evolve_all(&expired);
                log.extend(expired.into_iter().map(|event| (now, event)));
                break;
            }
            debug_assert_eq!(state.turn, Some(seat), "the replay keeps the turn order");
            now += Duration::seconds(self.rng.random_range(2..9));
            log.extend(run(
                &mut state,
                now,
                seats[seat],
                Command::Fire { cell },
                &mut self.rng,
            ));
        }
        assert_eq!(state.phase, Phase::Finished, "every replayed match ends");
        if let Some(event) = self.rate(&state, [first, second], now) {
            state.evolve(&event).expect("the rating folds");
            log.push((now, event));
        }
        LoadedMatch {
            id,
            state,
            events: numbered(log),
            created_at,
        }
    }

    /// The `rating_updated` event of a ranked result, moving both standings.
    fn rate(&mut self, state: &Match, seats: [usize; 2], at: DateTime<Utc>) -> Option<Event> {
        let ladder_index = RuleSetId::ALL
            .iter()
            .position(|&ruleset| ruleset == state.rules.ruleset)?;
        let fresh = Standing {
            rating: ladder::initial(),
            games: 0,
            wins: 0,
            losses: 0,
            draws: 0,
            updated_at: at,
        };
        let before = seats.map(|seat| {
            let standing = self
                .standings
                .get(&(ladder_index, seat))
                .copied()
                .unwrap_or(fresh);
            (self.players[seat], standing.rating, standing.games)
        });
        let (ruleset, changes) = ladder::changes(state, before)?;
        for (seat, change) in seats.iter().zip(&changes) {
            let standing = self.standings.entry((ladder_index, *seat)).or_insert(fresh);
            standing.rating = change.after;
            standing.games = change.game;
            match change.score {
                statki::engine::Score::Win => standing.wins += 1,
                statki::engine::Score::Loss => standing.losses += 1,
                statki::engine::Score::Draw => standing.draws += 1,
            }
            standing.updated_at = at;
        }
        Some(Event::RatingUpdated { ruleset, changes })
    }

    /// Every standing the history left, with the name of its player (`names`, in the order
    /// of the players the history was made with).
    pub fn standings(&self, names: &[(Uuid, PlayerName)]) -> Vec<LoadedStanding> {
        self.standings
            .iter()
            .map(|(&(ladder_index, seat), s)| LoadedStanding {
                ruleset: RuleSetId::ALL[ladder_index].as_str(),
                player: self.players[seat],
                name: {
                    let (id, name) = &names[seat];
                    assert_eq!(*id, self.players[seat], "names in the players' order");
                    name.as_str().to_owned()
                },
                rating: s.rating,
                games: s.games,
                wins: s.wins,
                losses: s.losses,
                draws: s.draws,
                updated_at: s.updated_at,
            })
            .collect()
    }

    /// The player with the most matches (the first regular).
    pub fn busiest_player(&self) -> Uuid {
        self.players[0]
    }
}
