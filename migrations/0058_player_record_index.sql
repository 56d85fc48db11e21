-- A player's record (wins, losses, draws over finished matches, shown on the profile) was
-- counted down the primary key with a visit to every one of the player's rows: a regular
-- with tens of thousands of matches cost as many heap pages per profile. This index holds
-- the counted column, so the count is an index-only scan: a few hundred entries a page.
-- It still grows with the player's finished matches, at a few hundredths of the cost.
CREATE INDEX player_matches_record_idx
    ON player_matches (player_id, result) WHERE status = 'finished';
