-- Views for operators auditing with plain SQL (queries in docs/audit.md). They read the
-- event log and the rating history; nothing here is used by the service itself.

-- One row per match. `reason` is the finish reason (all_sunk, resigned, shot_timeout,
-- placement_timeout, both_placement_timeout) or, for a cancelled match, the cancel reason
-- (not_joined, withdrawn). `draw` is true only for a finished match without a winner.
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
       e.ended_at,
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
           min(ev.at) FILTER (WHERE ev.kind IN ('match_finished', 'match_cancelled'))   AS ended_at,
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
