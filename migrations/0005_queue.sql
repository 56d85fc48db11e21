-- The ranked matchmaking queue: at most one entry per player (see docs/ladder.md).
--
-- A waiting entry has `match_id` NULL. Pairing two entries creates a ranked match with
-- both seats taken and sets `match_id` on both, so `GET /v1/queue` can still tell the
-- player where to go; the sweep removes paired and expired entries later.
CREATE TABLE queue_entries (
    player_id   uuid PRIMARY KEY REFERENCES players (id),
    ruleset     text NOT NULL,
    -- The player's ladder rating when they joined: pairing compares these.
    rating      double precision NOT NULL,
    joined_at   timestamptz NOT NULL,
    -- A waiting entry nobody paired by then is dropped.
    expires_at  timestamptz NOT NULL,
    match_id    uuid REFERENCES matches (id),
    paired_at   timestamptz,
    CHECK ((match_id IS NULL) = (paired_at IS NULL))
);

CREATE INDEX queue_waiting_idx ON queue_entries (ruleset, rating) WHERE match_id IS NULL;
