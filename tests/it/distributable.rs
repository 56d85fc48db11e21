//! Keeps the schema distributable by match (docs/scaling.md): every SQL statement in
//! `src/store/` that touches a per-match table names the match it is about, through
//! `match_id` (or the `id` of `matches`) in its filter or in the rows it inserts. Such a
//! statement reaches only the shards of the matches it names once those tables are
//! distributed by match id. The few statements that legitimately scan across matches are
//! listed in `CROSS_MATCH` with the reason; an entry that no longer matches any statement
//! fails the test too, so the list stays exact.

use std::path::{Path, PathBuf};

/// Tables (and the audit views over them) whose rows belong to one match.
const PER_MATCH: &[&str] = &[
    "matches",
    "match_events",
    "rating_changes",
    "rematch_offers",
    "rematches",
    "match_summary",
    "shot_log",
    "match_log",
];

/// Statements allowed to span matches: a distinctive fragment of the statement (lower case,
/// whitespace collapsed) and why it may.
const CROSS_MATCH: &[(&str, &str)] = &[
    (
        "from pg_dist_shard s join pg_dist_placement p on p.shardid = s.shardid",
        "the group commit's map of shard placements on Citus: the coordinator's metadata of the `matches` shards, no match row",
    ),
    (
        "from rematch_offers o where o.bot is not null",
        "bots answering rematch offers: a sweep of every shard (each through its index of offers to bots), like the offers' expiry",
    ),
    (
        "where m.phase = 'waiting' and (m.invited is null or m.invited = $1 or m.creator = $1)",
        "the open list: a page across shards, merged and limited on the coordinator",
    ),
    (
        "where m.phase in ('placement', 'battle') and $1::uuid is null",
        "the live list for spectators: a page across shards",
    ),
    (
        "update matches set wake_at = r.deadline from unnest(",
        "re-arming claimed clocks: keyed by the claimed match ids (`matches.id = r.id`), which the check does not read through unnest",
    ),
    (
        "from due d join matches m on m.id = d.match_id",
        "the bot worker claims due bot turns of every shard (from the bot_turns queue), as the clock sweep claims due matches",
    ),
    (
        "from matches where wake_at <= $1",
        "the clock sweep claims due matches of every shard (one scan of the wake-up index per shard)",
    ),
    (
        "select min(wake_at) from matches",
        "the clock's next wake-up: a min over every shard",
    ),
    (
        "select phase, count(*) as n from matches group by phase",
        "on Citus, matches per phase for /metrics: a count over every shard (the phase triggers cannot write from a shard)",
    ),
    (
        "select count(*) from match_events",
        "the event total for /metrics: a count over every shard",
    ),
    (
        "from matches where $1::uuid is null or id > $1 order by id",
        "statki verify walks every match, a page at a time: an offline audit, best run on a read replica",
    ),
    (
        "select id from matches order by created_at",
        "statki verify lists every match: an offline audit",
    ),
    (
        "from matches where wake_at is not null and deadline > $1 order by deadline",
        "outage recovery gives every running clock its time back: a rare scan of every shard",
    ),
    (
        "from rating_changes order by ruleset, player_id, game",
        "statki verify replays every ladder from its rating history: an offline audit",
    ),
    (
        "delete from rematch_offers where expires_at <= $1",
        "expiry of unanswered rematch offers on plain PostgreSQL: a periodic sweep by time",
    ),
    (
        "select distinct match_id from rematch_offers where expires_at <= $1",
        "expiry of unanswered rematch offers on Citus: a read of every shard, each due offer then deleted on its shard",
    ),
    (
        "select t, pg_total_relation_size(t::regclass)",
        "the scale benchmark's disk figures (test support only): the sizes of whole tables, no rows read",
    ),
    (
        "from unnest($2::uuid[]",
        "the group commit's row update for a batch of matches: keyed by the ids in the batch, but a join with a parameter array is not pruned to their shards, so a distributed deployment groups batches by shard",
    ),
];

/// Statements on `player_matches` and `player_records` (distributed by player) allowed to
/// span players, and why.
const CROSS_PLAYER: &[(&str, &str)] = &[
    (
        "from player_matches where status = 'finished' group by player_id",
        "every player's record counted afresh from their rows: at the end of a bulk load (test support) and in statki verify's check of the kept records, whole tables by design (on Citus each shard's group, co-located)",
    ),
    (
        "delete from player_records",
        "a bulk load's recount of the records (test support), before they are counted afresh",
    ),
    (
        "from player_matches where match_id = any($1)",
        "statki verify compares each page of matches with its players' rows: an offline audit",
    ),
    (
        "select count(*) from player_matches",
        "statki verify counts every player's row: an offline audit",
    ),
    (
        "not exists (select 1 from player_matches pm where pm.player_id = q.player_id",
        "plain PostgreSQL only: the queue joined with the players' rows (on Citus, store::citus asks each candidate's shard instead)",
    ),
    (
        "select t, pg_total_relation_size(t::regclass)",
        "the scale benchmark's disk figures (test support only): the sizes of whole tables, no rows read",
    ),
];

/// SQL text handed to sqlx, with the file it is in.
pub(crate) struct Statement {
    pub(crate) file: PathBuf,
    pub(crate) sql: String,
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/store") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The string literal starting at `text` (after optional whitespace): `"…"` with escapes, or
/// a raw `r"…"` / `r#"…"#`. `None` when the argument is not a literal.
fn literal(text: &str) -> Option<String> {
    let text = text.trim_start();
    if let Some(raw) = text.strip_prefix('r') {
        let hashes = raw.chars().take_while(|c| *c == '#').count();
        let body = raw[hashes..].strip_prefix('"')?;
        let end = body.find(&format!("\"{}", "#".repeat(hashes)))?;
        return Some(body[..end].to_owned());
    }
    let body = text.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                // A line continuation: the newline and the next line's indentation go.
                '\n' => {
                    let rest: String = chars.clone().collect();
                    let skipped = rest.len() - rest.trim_start().len();
                    for _ in 0..rest[..skipped].chars().count() {
                        chars.next();
                    }
                }
                other => out.push(other),
            },
            other => out.push(other),
        }
    }
    None
}

/// Every statement passed to `sqlx::query*` or `QueryBuilder::new` in `src/store/`;
/// panics on a call whose SQL is not a literal, since it could not be checked.
pub(crate) fn statements() -> Vec<Statement> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a store file");
        for marker in ["sqlx::query", "QueryBuilder::new"] {
            for (at, _) in source.match_indices(marker) {
                let rest = &source[at + marker.len()..];
                // The rest of the function's name, then an optional turbofish.
                let rest = rest.trim_start_matches(|c: char| c.is_ascii_lowercase() || c == '_');
                let rest = match rest.strip_prefix("::<") {
                    Some(generic) => {
                        let mut depth = 1;
                        let end = generic
                            .char_indices()
                            .find(|(_, c)| {
                                match c {
                                    '<' => depth += 1,
                                    '>' => depth -= 1,
                                    _ => {}
                                }
                                depth == 0
                            })
                            .map(|(index, _)| index)
                            .expect("a closed turbofish");
                        &generic[end + 1..]
                    }
                    None => rest,
                };
                let Some(arguments) = rest.trim_start().strip_prefix('(') else {
                    continue; // a path such as `sqlx::query::Query`, not a call
                };
                let line = source[..at].lines().count();
                let sql = literal(arguments).or_else(|| constant(&source, arguments)).unwrap_or_else(|| {
                    panic!(
                        "{}:{line}: SQL that is not a string literal cannot be checked for distribution; write it as a literal",
                        file.display()
                    )
                });
                found.push(Statement {
                    file: file.clone(),
                    sql,
                });
            }
        }
    }
    found
}

/// The literal of a `const NAME: &str = "…";` of the same file, when `arguments` starts
/// with that name (statements shared with the cost tests are named constants).
fn constant(source: &str, arguments: &str) -> Option<String> {
    let name: String = arguments
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
        .collect();
    if name.is_empty() {
        return None;
    }
    let declared = format!("const {name}: &str =");
    let at = source.find(&declared)?;
    literal(&source[at + declared.len()..])
}

pub(crate) fn normalise(sql: &str) -> String {
    sql.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether `word` occurs in `sql` as a whole identifier (a qualifier like `m.` may precede).
fn mentions(sql: &str, word: &str) -> bool {
    sql.match_indices(word).any(|(at, _)| {
        let before = sql[..at].chars().next_back();
        let after = sql[at + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        !part(before) && !part(after)
    })
}

/// Whether the statement names its matches: `match_id`/`id` compared with a parameter or
/// a list of them, joined to a row that is, or written as a column of the inserted rows.
fn keyed_by_match(sql: &str) -> bool {
    let compared = ["match_id", "id"].iter().any(|key| {
        sql.match_indices(key).any(|(at, _)| {
            let before = sql[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                return false;
            }
            let after = sql[at + key.len()..].trim_start();
            after.starts_with("= $")
                || after.starts_with("= any($")
                || after.starts_with("= any ($")
                || after.starts_with("in (select")
        })
    });
    let inserted = sql.starts_with("insert into")
        || sql.contains(") insert into")
        || sql.starts_with("with ") && sql.contains(" insert into ");
    let inserts_key = inserted
        && sql.split("insert into ").skip(1).all(|insert| {
            let columns = insert.split(')').next().unwrap_or_default();
            PER_MATCH
                .iter()
                .all(|table| !insert.starts_with(&format!("{table} ")))
                || mentions(columns, "match_id")
                || mentions(columns, "id")
        });
    compared || inserts_key
}

/// Checks every statement of `src/store` that `touches` picks: `keyed` holds for it, or it
/// contains a fragment of `allowed` (the statements that span keys by design); an entry of
/// `allowed` that no statement contains any more fails too. Returns how many it checked.
fn assert_keyed(
    touches: impl Fn(&str) -> bool,
    keyed: impl Fn(&str) -> bool,
    allowed: &[(&str, &str)],
    advice: &str,
) -> usize {
    let mut unkeyed = Vec::new();
    let mut allowed_used = vec![false; allowed.len()];
    let mut checked = 0;
    for statement in statements() {
        let sql = normalise(&statement.sql);
        if !touches(&sql) {
            continue;
        }
        checked += 1;
        if let Some(index) = allowed
            .iter()
            .position(|(fragment, _)| sql.contains(fragment))
        {
            allowed_used[index] = true;
            continue;
        }
        if !keyed(&sql) {
            unkeyed.push(format!("{}: {sql}", statement.file.display()));
        }
    }
    assert!(unkeyed.is_empty(), "{advice}:\n{}", unkeyed.join("\n"));
    let stale: Vec<&str> = allowed
        .iter()
        .zip(&allowed_used)
        .filter(|(_, used)| !**used)
        .map(|((fragment, _), _)| *fragment)
        .collect();
    assert!(
        stale.is_empty(),
        "allowed entries that match no statement any more (remove them): {stale:?}"
    );
    checked
}

#[test]
fn every_statement_on_a_per_match_table_names_its_matches() {
    let statements = statements().len();
    assert!(
        statements > 40,
        "found only {statements} statements in src/store; is the scanner still reading the code?"
    );
    let per_match = assert_keyed(
        |sql| PER_MATCH.iter().any(|table| mentions(sql, table)),
        keyed_by_match,
        CROSS_MATCH,
        "statements on per-match tables that name no match (key them by match_id, or add them \
         to CROSS_MATCH with the reason and to docs/scaling.md)",
    );
    eprintln!(
        "{per_match} of {statements} statements touch per-match tables; {} of them span matches by design",
        CROSS_MATCH.len()
    );
}

#[test]
fn the_keying_check_tells_keyed_from_unkeyed_statements() {
    let keyed = [
        "select snapshot from matches where id = $1 for update",
        "update matches set phase = $2 where id = any($1)",
        "insert into match_events (match_id, seq, at) select * from unnest($1::uuid[], $2::bigint[], $3::timestamptz[])",
        "select e.seq from match_events e join matches m on m.id = e.match_id where e.match_id = $1",
    ];
    for sql in keyed {
        assert!(keyed_by_match(sql), "{sql}");
    }
    let unkeyed = [
        "select id from matches where phase = 'battle'",
        "update matches set deadline = null where deadline < now()",
        "select * from match_events where player_id = $1",
        "delete from rematch_offers where player_id = $1",
    ];
    for sql in unkeyed {
        assert!(!keyed_by_match(sql), "{sql}");
    }
}

/// Whether a statement on `player_matches` names its players: `player_id` compared with a
/// parameter or a list of them, or written as a column of the inserted rows.
fn keyed_by_player(sql: &str) -> bool {
    let compared = sql.match_indices("player_id").any(|(at, _)| {
        let after = sql[at + "player_id".len()..].trim_start();
        after.starts_with("= $") || after.starts_with("= any($")
    });
    let inserts_key = sql.starts_with("insert into player_matches (player_id")
        || sql.starts_with("insert into player_records (player_id");
    compared || inserts_key
}

#[test]
fn every_statement_on_player_matches_or_records_names_its_players() {
    let by_player = assert_keyed(
        |sql| mentions(sql, "player_matches") || mentions(sql, "player_records"),
        keyed_by_player,
        CROSS_PLAYER,
        "statements on player_matches or player_records that name no player (key them by \
         player_id, or add them to CROSS_PLAYER with the reason and to docs/scaling.md)",
    );
    assert!(
        by_player >= 6,
        "only {by_player} statements on player_matches?"
    );
    assert!(keyed_by_player(
        "select 1 from player_matches where player_id = $1"
    ));
    assert!(!keyed_by_player(
        "select 1 from player_matches where status = 'playing'"
    ));
}
