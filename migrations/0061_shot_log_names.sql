-- `shot_log` joined `players` for each shooter's name. For one match's shots, read as
-- `match_id = (SELECT …)`, the planner expects thousands of events (its estimate for any
-- match among 1.1 × 10⁸ rows) and hashes every player for them: 21 ms at a million
-- finished matches among 120,000 players, against 0.8 ms on a small database. The name is
-- looked up per shot instead, which costs the same at any number of players. The same
-- columns in the same order, so grants and queries stay as they are.
--
-- Through EXECUTE: Citus sends a view's DDL to the other nodes as the text of the query
-- it came in, and a node refuses several commands in one.
DO $view$
BEGIN
    EXECUTE $sql$
        CREATE OR REPLACE VIEW shot_log AS
        SELECT e.match_id,
               e.seq,
               e.at,
               e.actor                                AS shooter,
               (SELECT ps.name FROM players ps WHERE ps.id = e.actor) AS shooter_name,
               CASE WHEN e.actor = m.creator THEN m.joiner ELSE m.creator END AS target,
               e.payload->>'cell'                     AS cell,
               e.payload->>'outcome'                  AS outcome,
               e.payload->'sunk_ship'->>'name'        AS sunk_ship,
               (e.payload->>'next_turn')::uuid        AS next_turn
        FROM match_events e
        JOIN matches m ON m.id = e.match_id
        WHERE e.kind = 'shot_fired'
    $sql$;
END;
$view$;
