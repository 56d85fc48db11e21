-- A player's record (wins, losses, draws over finished matches, shown on the profile) was
-- counted from `player_matches` on every read: an index-only count since migration 0058,
-- but still one index entry per finished match of the player's, 600 buffers and 5–10 ms
-- for a regular with 42,000 of them. This table keeps the three counts per player,
-- added to in the same transaction as the `player_matches` rows that finish
-- (`store::player_matches::store`), so a profile reads one row whatever the player's
-- history. Derived data: `statki verify` checks it against `player_matches`.
CREATE TABLE player_records (
    player_id  uuid PRIMARY KEY,
    wins       bigint NOT NULL DEFAULT 0 CHECK (wins >= 0),
    losses     bigint NOT NULL DEFAULT 0 CHECK (losses >= 0),
    draws      bigint NOT NULL DEFAULT 0 CHECK (draws >= 0)
);

-- On Citus beside each player's rows of `player_matches`: the record and the rows it
-- counts are written on the player's one shard.
DO $citus$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM create_distributed_table('player_records', 'player_id',
                                         colocate_with => 'player_matches');
    END IF;
END;
$citus$;

-- The records as they stand.
INSERT INTO player_records (player_id, wins, losses, draws)
SELECT player_id, count(*) FILTER (WHERE result = 'win'), count(*) FILTER (WHERE result = 'loss'),
       count(*) FILTER (WHERE result = 'draw')
FROM player_matches WHERE status = 'finished' GROUP BY player_id;

-- Nothing reads a record from `player_matches` any more. Dropped through EXECUTE: Citus
-- sends a DROP INDEX of a distributed table to the workers as the text of the query it
-- came in, here the whole migration, and a worker refuses several commands in one.
DO $drop$
BEGIN
    EXECUTE 'DROP INDEX player_matches_record_idx';
END;
$drop$;

DO $grants$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
        GRANT SELECT ON player_records TO statki_auditor;
    END IF;
END;
$grants$;
