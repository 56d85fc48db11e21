-- Rematch offers after a finished match. When both players of a match have a live offer,
-- a new match with the same rule set and rankedness starts and is remembered in
-- `rematches`, so a late second request is answered with the same new match.
CREATE TABLE rematch_offers (
    match_id    uuid NOT NULL REFERENCES matches (id),
    player_id   uuid NOT NULL REFERENCES players (id),
    offered_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (match_id, player_id)
);

CREATE INDEX rematch_offers_expiry_idx ON rematch_offers (expires_at);

CREATE TABLE rematches (
    match_id    uuid PRIMARY KEY REFERENCES matches (id),
    rematch_id  uuid NOT NULL UNIQUE REFERENCES matches (id),
    created_at  timestamptz NOT NULL
);
