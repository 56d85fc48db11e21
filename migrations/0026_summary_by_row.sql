-- The audit views at scale. A match row now records when the match ended (`ended_at`, set
-- by the write that finishes or cancels it; NULL while it runs, so writes of a running
-- match leave it and its index alone and stay heap-only updates), and `match_summary`
-- takes `ended_at` from it and computes every other column from the event log only when a
-- query reads that column, one index descent of the match's own events each. Queries that
-- filter or order by `ended_at` (the README's "timeouts in the last seven days", "the
-- latest match won by sinking the fleet") read the matches of that window through an index
-- instead of aggregating every match's events.
ALTER TABLE matches ADD COLUMN ended_at timestamptz;
UPDATE matches SET ended_at = updated_at WHERE phase IN ('finished', 'cancelled');
CREATE INDEX matches_ended_idx ON matches (ended_at) WHERE ended_at IS NOT NULL;

CREATE OR REPLACE VIEW match_summary AS
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
       coalesce(m.reason,
                (SELECT min(ev.payload->>'reason') FROM match_events ev
                 WHERE ev.match_id = m.id AND ev.kind = 'match_cancelled')) AS reason,
       m.created_at,
       (SELECT min(ev.at) FROM match_events ev
        WHERE ev.match_id = m.id AND ev.kind = 'player_joined') AS started_at,
       (SELECT min(ev.at) FROM match_events ev
        WHERE ev.match_id = m.id AND ev.kind = 'battle_started') AS battle_started_at,
       m.ended_at,
       (SELECT count(*) FROM match_events ev
        WHERE ev.match_id = m.id AND ev.kind = 'shot_fired') AS shots,
       (SELECT count(*) FROM match_events ev
        WHERE ev.match_id = m.id AND ev.kind = 'shot_fired'
          AND ev.payload->>'outcome' <> 'miss') AS hits,
       m.last_seq                             AS events
FROM matches m
JOIN players p1 ON p1.id = m.creator
LEFT JOIN players p2 ON p2.id = m.joiner
LEFT JOIN players pw ON pw.id = m.winner;

