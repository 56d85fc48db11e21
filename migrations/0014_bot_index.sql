-- The bot worker looks up the bots (`players WHERE bot_level IS NOT NULL`) on every poll,
-- several times a second on every replica. Without an index that is a scan of every
-- player; this partial index holds the three bots alone.
CREATE INDEX players_bots_idx ON players (id) WHERE bot_level IS NOT NULL;
