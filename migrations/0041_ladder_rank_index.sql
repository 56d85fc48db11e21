-- A rank is one plus the number of rated players above: counted from this index alone (an
-- index-only scan of the players above), instead of ranking a whole ladder per request.
CREATE INDEX ratings_rank_idx ON ratings (ruleset, rating DESC) WHERE games > 0;
