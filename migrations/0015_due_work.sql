-- Periodic work reads only what is due, not every match in play.
--
-- Bot turns: one row per match in which a bot has something to do (join the match it is
-- invited to, place its fleet, or shoot on its turn). The write path keeps it in the same
-- statement that writes the match row (`store::matches::insert` and `write`), so it is
-- exactly as durable as the match. The bot worker claims from it through the indexes on
-- `since` (when the match last changed: the bot's pause runs from there) and `deadline`
-- (a bot acts at once when its clock is about to run out).
CREATE TABLE bot_turns (
    match_id  uuid PRIMARY KEY,
    bot       uuid NOT NULL,
    -- Joining or placing (a short pause) rather than shooting.
    setup     boolean NOT NULL,
    since     timestamptz NOT NULL,
    deadline  timestamptz
);
CREATE INDEX bot_turns_since_idx ON bot_turns (since);
CREATE INDEX bot_turns_deadline_idx ON bot_turns (deadline) WHERE deadline IS NOT NULL;

INSERT INTO bot_turns (match_id, bot, setup, since, deadline)
SELECT DISTINCT ON (m.id) m.id, b.id, m.phase <> 'battle', m.updated_at, m.deadline
FROM matches m
JOIN players b ON b.bot_level IS NOT NULL
 AND ((m.phase = 'waiting' AND m.invited = b.id)
      OR (m.phase = 'battle' AND m.turn = b.id)
      OR (m.phase = 'placement' AND b.id IN (m.creator, m.joiner)
          AND NOT EXISTS (SELECT 1 FROM match_events e
                          WHERE e.match_id = m.id AND e.kind = 'fleet_locked'
                            AND e.actor = b.id)))
ORDER BY m.id, b.id;

-- Matches per phase, for the `statki_matches` gauge, without counting the table: every
-- insert of a match and every change of its phase appends a delta (a trigger, so no
-- writer can forget it, and an append, so writers never queue on one counter row);
-- housekeeping folds the deltas into `match_phase_counts` before reading the gauge, so a
-- reading costs the phase changes since the last one.
CREATE TABLE match_phase_counts (
    phase  text PRIMARY KEY,
    n      bigint NOT NULL
);
CREATE TABLE match_phase_deltas (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    phase  text NOT NULL,
    delta  integer NOT NULL
);

CREATE FUNCTION match_phase_delta() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO match_phase_deltas (phase, delta) VALUES (OLD.phase, -1);
    END IF;
    INSERT INTO match_phase_deltas (phase, delta) VALUES (NEW.phase, 1);
    RETURN NULL;
END;
$$;

CREATE TRIGGER matches_phase_inserted AFTER INSERT ON matches
    FOR EACH ROW EXECUTE FUNCTION match_phase_delta();
CREATE TRIGGER matches_phase_changed AFTER UPDATE OF phase ON matches
    FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase)
    EXECUTE FUNCTION match_phase_delta();

LOCK TABLE matches IN SHARE MODE;
INSERT INTO match_phase_counts (phase, n)
SELECT phase, count(*) FROM matches GROUP BY phase;

-- Expired stream leases are found by their renewal time alone.
CREATE INDEX stream_leases_renewed_idx ON stream_leases (renewed_at);
-- Retention of player notices is by age.
CREATE INDEX player_notices_at_idx ON player_notices (at);
