-- The bot worker answers rematch offers made to bots. Each offer now names the bot it waits
-- for (NULL when the other player is human), written with the offer, so the worker reads
-- only offers to bots through a partial index instead of every live offer.
ALTER TABLE rematch_offers ADD COLUMN bot uuid REFERENCES players (id);

UPDATE rematch_offers o SET bot = p.id
FROM matches m JOIN players p ON p.id IN (m.creator, m.joiner) AND p.bot_level IS NOT NULL
WHERE m.id = o.match_id AND p.id <> o.player_id;

CREATE INDEX rematch_offers_to_bots_idx ON rematch_offers (offered_at) WHERE bot IS NOT NULL;
