-- Bot opponents. A bot is a player row with a level: it is challenged like any player and
-- plays through the same command path, run by a worker in every replica (src/bot/worker.rs).
-- Bots have no password and are issued no token, so nobody can act as one.
ALTER TABLE players
    ADD COLUMN bot_level text CHECK (bot_level IN ('easy', 'medium', 'hard')),
    ADD COLUMN bot_description text,
    ADD CONSTRAINT players_bot_described CHECK ((bot_level IS NULL) = (bot_description IS NULL));

-- The three house bots, with fixed ids so clients and tests can name them.
INSERT INTO players (id, name, name_key, bot_level, bot_description)
SELECT id::uuid, name, lower(name), level, description FROM (VALUES
    ('00000000-0000-4000-8000-00000000b001', 'Kadet (bot)', 'easy',
     'Fires at random, but never at a cell the rules already prove empty.'),
    ('00000000-0000-4000-8000-00000000b002', 'Bosman (bot)', 'medium',
     'Hunts on a checkerboard and finishes every ship it hits along its line.'),
    ('00000000-0000-4000-8000-00000000b003', 'Admirał (bot)', 'hard',
     'Fires where the most legal placements of your remaining ships overlap.')
) AS bots (id, name, level, description)
ON CONFLICT DO NOTHING;

-- The worker looks for live matches with a bot seat on every tick. These partial indexes
-- hold only matches still being played, and none of their columns changes on a shot.
CREATE INDEX matches_waiting_invited_idx ON matches (invited) WHERE phase = 'waiting';
CREATE INDEX matches_live_creator_idx ON matches (creator) WHERE phase IN ('placement', 'battle');
CREATE INDEX matches_live_joiner_idx ON matches (joiner) WHERE phase IN ('placement', 'battle');
