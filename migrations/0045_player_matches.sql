-- A player's matches, kept by the write path in the same transaction as the change each row
-- mirrors (creation, a player joining, the result or the cancellation), so that a player's
-- match list, their record and "already in a running match?" are read down one index of one
-- player (docs/scaling.md). On Citus the table is distributed by `player_id` (its own
-- co-location group): every such read is a statement on one shard.
--
-- One row per player a match names: its creator, its joiner, and the player it invites
-- until they take the seat (`role` becomes 'joiner'). `status` is the match's phase with
-- placement and battle as one 'playing' (the write path touches this table only when a
-- match is created, seated, finished or cancelled, never for a shot); `result` is this
-- player's ('win', 'loss', 'draw') once the match finished.
CREATE TABLE player_matches (
    player_id   uuid NOT NULL,
    match_id    uuid NOT NULL,
    role        text NOT NULL CHECK (role IN ('creator', 'joiner', 'invited')),
    opponent    uuid,
    ruleset     text NOT NULL,
    ranked      boolean NOT NULL,
    status      text NOT NULL CHECK (status IN ('waiting', 'playing', 'finished', 'cancelled')),
    result      text CHECK (result IN ('win', 'loss', 'draw')),
    created_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    PRIMARY KEY (player_id, match_id),
    CHECK ((result IS NOT NULL) = (status = 'finished'))
);

-- A player's matches newest first, a page after a (created_at, match_id) cursor: one
-- descent per page, whichever page.
CREATE INDEX player_matches_page_idx
    ON player_matches (player_id, created_at DESC, match_id DESC) WHERE role <> 'invited';
-- "Already in a running match?", and the caps on open matches and waiting challenges.
CREATE INDEX player_matches_open_idx
    ON player_matches (player_id, role, created_at) WHERE status IN ('waiting', 'playing', 'cancelled');
-- `statki verify` compares each page of matches with its players' rows.
CREATE INDEX player_matches_match_idx ON player_matches (match_id);

DO $citus$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM create_distributed_table('player_matches', 'player_id', colocate_with => 'none');
    END IF;
END;
$citus$;

-- Existing matches, each player's row (the table is empty, so this is plain inserts; on
-- Citus a repartitioned insert from the shards of `matches`).
INSERT INTO player_matches (player_id, match_id, role, opponent, ruleset, ranked, status,
                            result, created_at, ended_at)
SELECT s.player, m.id, s.role, s.opponent, m.ruleset, m.ranked,
       CASE WHEN m.phase IN ('placement', 'battle') THEN 'playing' ELSE m.phase END,
       CASE WHEN m.phase <> 'finished' THEN NULL
            WHEN m.winner IS NULL THEN 'draw'
            WHEN m.winner = s.player THEN 'win'
            ELSE 'loss' END,
       m.created_at, m.ended_at
FROM matches m
CROSS JOIN LATERAL (VALUES (m.creator, 'creator', coalesce(m.joiner, m.invited)),
                           (m.joiner, 'joiner', m.creator),
                           (CASE WHEN m.joiner IS NULL THEN m.invited END, 'invited', m.creator))
    AS s(player, role, opponent)
WHERE s.player IS NOT NULL;

DO $grants$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
        GRANT SELECT ON player_matches TO statki_auditor;
    END IF;
END;
$grants$;
