-- Distribution by match on Citus (docs/scaling.md). On plain PostgreSQL this migration does
-- nothing: every statement below runs only when the `citus` extension exists in this
-- database (scripts/citus creates it on every node).
--
-- Per-match tables are distributed by match id and co-located, so all of one match's rows
-- live on one worker: `matches` by `id`; `match_events`, `rating_changes`,
-- `rematch_offers`, `rematches` and `bot_turns` by `match_id`. `players` and `ratings` are
-- reference tables (a copy on every node), so the per-match tables keep their foreign keys
-- to them. Everything else stays on the coordinator, added to Citus's metadata as a local
-- table where a foreign key to `players` requires it.
--
-- What Citus cannot keep, and what holds it instead:
-- - foreign keys from coordinator tables to `matches` (`queue_entries.match_id`,
--   `rematches.rematch_id`) and the unique constraints without the distribution column
--   (`rematches (rematch_id)`, `rating_changes (ruleset, player_id, game)`): a rematch's id
--   is a fresh UUID and a player's game numbers are taken under the match lock, and
--   `statki verify` checks the rating chains;
-- - the phase-count triggers on `matches` (a trigger on a shard cannot write to a table on
--   the coordinator): on Citus the `statki_matches` gauge counts `matches` by phase, a
--   parallel count of every shard (`store::matches::count_by_phase`);
-- - the auditor's row policy on `match_events`, which looks up the match row (Citus cannot
--   put a subquery in a shard's policy): the auditor reads events through the audit views,
--   which hold no fleet or salt, and no row of `match_events` directly.
-- The audit views depend on the tables and are dropped and created again around the
-- distribution, with their grants; the row security policies likewise. The append-only
-- triggers of `match_events` and `rating_changes` are created on every shard
-- (`citus.enable_unsafe_triggers`), and Citus creates them on a shard moved or split later.
DO $citus$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    SET LOCAL citus.enable_unsafe_triggers = on;
    -- The tables are empty or small when this runs; copying them in one connection per
    -- node keeps the transaction's view of them consistent.
    SET LOCAL citus.multi_shard_modify_mode = 'sequential';

    DROP VIEW match_summary, shot_log, rating_history;
    DROP POLICY auditor_after_the_end ON matches;
    DROP POLICY auditor_after_the_end ON match_events;
    DROP POLICY IF EXISTS service_all ON matches;
    DROP POLICY IF EXISTS service_all ON match_events;
    DROP TRIGGER matches_phase_inserted ON matches;
    DROP TRIGGER matches_phase_changed ON matches;

    ALTER TABLE queue_entries DROP CONSTRAINT queue_entries_match_id_fkey;
    ALTER TABLE rematches DROP CONSTRAINT rematches_rematch_id_fkey;
    ALTER TABLE rematches DROP CONSTRAINT rematches_rematch_id_key;
    ALTER TABLE rating_changes DROP CONSTRAINT rating_changes_ruleset_player_id_game_key;
    -- Within the co-location group; added back once every table is distributed.
    ALTER TABLE match_events DROP CONSTRAINT match_events_match_id_fkey;
    ALTER TABLE rating_changes DROP CONSTRAINT rating_changes_match_id_seq_fkey;
    ALTER TABLE rematch_offers DROP CONSTRAINT rematch_offers_match_id_fkey;
    ALTER TABLE rematches DROP CONSTRAINT rematches_match_id_fkey;

    PERFORM create_reference_table('players');
    PERFORM create_reference_table('ratings');
    PERFORM create_distributed_table('matches', 'id');
    PERFORM create_distributed_table('match_events', 'match_id', colocate_with => 'matches');
    PERFORM create_distributed_table('rating_changes', 'match_id', colocate_with => 'matches');
    PERFORM create_distributed_table('rematch_offers', 'match_id', colocate_with => 'matches');
    PERFORM create_distributed_table('rematches', 'match_id', colocate_with => 'matches');
    PERFORM create_distributed_table('bot_turns', 'match_id', colocate_with => 'matches');

    ALTER TABLE match_events ADD FOREIGN KEY (match_id) REFERENCES matches (id);
    ALTER TABLE rating_changes ADD FOREIGN KEY (match_id, seq)
        REFERENCES match_events (match_id, seq);
    ALTER TABLE rematch_offers ADD FOREIGN KEY (match_id) REFERENCES matches (id);
    ALTER TABLE rematches ADD FOREIGN KEY (match_id) REFERENCES matches (id);

    -- The audit views of migration 0007, with `ended_at` from the row as migration 0026 has
    -- it (Citus plans the event columns as one lateral aggregate pushed to each shard).
    CREATE VIEW match_summary AS
    SELECT m.id                                   AS match_id,
           m.ruleset,
           m.ranked,
           m.phase,
           m.creator                              AS player_one,
           p1.name                                AS player_one_name,
           m.joiner                               AS player_two,
           p2.name                                AS player_two_name,
           m.winner,
           pw.name                                AS winner_name,
           (m.phase = 'finished' AND m.winner IS NULL) AS draw,
           coalesce(m.reason, e.cancel_reason)    AS reason,
           m.created_at,
           e.started_at,
           e.battle_started_at,
           m.ended_at,
           e.shots,
           e.hits,
           m.last_seq                             AS events
    FROM matches m
    JOIN players p1 ON p1.id = m.creator
    LEFT JOIN players p2 ON p2.id = m.joiner
    LEFT JOIN players pw ON pw.id = m.winner
    CROSS JOIN LATERAL (
        SELECT min(ev.at) FILTER (WHERE ev.kind = 'player_joined')                          AS started_at,
               min(ev.at) FILTER (WHERE ev.kind = 'battle_started')                         AS battle_started_at,
               count(*) FILTER (WHERE ev.kind = 'shot_fired')                               AS shots,
               count(*) FILTER (WHERE ev.kind = 'shot_fired' AND ev.payload->>'outcome' <> 'miss') AS hits,
               min(ev.payload->>'reason') FILTER (WHERE ev.kind = 'match_cancelled')        AS cancel_reason
        FROM match_events ev
        WHERE ev.match_id = m.id
    ) e;

    -- One row per shot, in the order fired. `sunk_ship` is the sunk ship's type: operators
    -- see the whole record, unlike players.
    CREATE VIEW shot_log AS
    SELECT e.match_id,
           e.seq,
           e.at,
           e.actor                                AS shooter,
           ps.name                                AS shooter_name,
           CASE WHEN e.actor = m.creator THEN m.joiner ELSE m.creator END AS target,
           e.payload->>'cell'                     AS cell,
           e.payload->>'outcome'                  AS outcome,
           e.payload->'sunk_ship'->>'name'        AS sunk_ship,
           (e.payload->>'next_turn')::uuid        AS next_turn
    FROM match_events e
    JOIN matches m ON m.id = e.match_id
    JOIN players ps ON ps.id = e.actor
    WHERE e.kind = 'shot_fired';

    -- One row per rating change: a player's rated game on a ladder.
    CREATE VIEW rating_history AS
    SELECT rc.ruleset,
           rc.player_id,
           p.name,
           rc.game,
           rc.at,
           rc.match_id,
           rc.opponent_id,
           o.name                                 AS opponent_name,
           rc.score,
           rc.rating_before,
           rc.rating_after,
           rc.rating_after - rc.rating_before     AS rating_delta,
           rc.deviation_before,
           rc.deviation_after,
           rc.volatility_before,
           rc.volatility_after
    FROM rating_changes rc
    JOIN players p ON p.id = rc.player_id
    JOIN players o ON o.id = rc.opponent_id;

    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
        GRANT SELECT ON match_summary, shot_log, rating_history TO statki_auditor;
    END IF;

    -- Row security as migrations 0023 and 0024 set it, but for the auditor's policy on the
    -- events (see above): row security stays enabled on `match_events`, so without a
    -- policy the auditor reads none of its rows directly.
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
        CREATE POLICY auditor_after_the_end ON matches
            FOR SELECT TO statki_auditor
            USING (phase IN ('finished', 'cancelled'));
    END IF;
    -- Citus reaches the workers as the role a statement runs as, so the roles the service
    -- and the auditors switch to (`SET ROLE`) must be allowed to log in there. They still
    -- have no password: where the cluster asks for one, nobody logs in as them directly.
    -- Roles belong to the whole cluster: concurrent first migrations of several databases
    -- may race to alter them ("tuple concurrently updated"), and one of them is enough.
    BEGIN
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor' AND NOT rolcanlogin) THEN
            ALTER ROLE statki_auditor LOGIN;
        END IF;
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_app' AND NOT rolcanlogin) THEN
            ALTER ROLE statki_app LOGIN;
        END IF;
    EXCEPTION
        WHEN internal_error THEN NULL;
    END;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_app') THEN
        -- The shards took the default privileges (migration 0024) when Citus created them;
        -- the record of play is appended and read, never changed, there too.
        REVOKE UPDATE, DELETE, TRUNCATE ON match_events, rating_changes FROM statki_app;
        CREATE POLICY service_all ON matches TO statki_app USING (true) WITH CHECK (true);
        CREATE POLICY service_all ON match_events TO statki_app USING (true) WITH CHECK (true);
    END IF;
END;
$citus$;
