-- The ranked ladders: one per rule set, Glicko-2 (see docs/ladder.md).
--
-- `ratings` is each player's current standing on a ladder; a row appears with the
-- player's first rated match. `rating_changes` is the history, one row per player per
-- rated match, written in the same transaction as the match's `match_finished` and
-- `rating_updated` events (the event carries the same numbers). The current standing is
-- the last `after` of the player's history, which `statki verify` checks.

CREATE TABLE ratings (
    ruleset     text NOT NULL,
    player_id   uuid NOT NULL REFERENCES players (id),
    rating      double precision NOT NULL,
    deviation   double precision NOT NULL,
    volatility  double precision NOT NULL,
    games       integer NOT NULL CHECK (games >= 0),
    wins        integer NOT NULL CHECK (wins >= 0),
    losses      integer NOT NULL CHECK (losses >= 0),
    draws       integer NOT NULL CHECK (draws >= 0),
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (ruleset, player_id),
    CHECK (games = wins + losses + draws)
);

-- The ladder page: best first, ties broken by player id so the cursor is total.
CREATE INDEX ratings_ladder_idx ON ratings (ruleset, rating DESC, player_id);
CREATE INDEX ratings_player_idx ON ratings (player_id);

CREATE TABLE rating_changes (
    match_id            uuid NOT NULL,
    -- The `rating_updated` event this row copies.
    seq                 bigint NOT NULL,
    player_id           uuid NOT NULL REFERENCES players (id),
    opponent_id         uuid NOT NULL REFERENCES players (id),
    ruleset             text NOT NULL,
    at                  timestamptz NOT NULL,
    score               text NOT NULL CHECK (score IN ('win', 'loss', 'draw')),
    -- The player's n-th rated game on this ladder: the history of one player is the
    -- chain game = 1, 2, 3, … with each `before` equal to the previous `after`.
    game                integer NOT NULL CHECK (game >= 1),
    rating_before       double precision NOT NULL,
    deviation_before    double precision NOT NULL,
    volatility_before   double precision NOT NULL,
    rating_after        double precision NOT NULL,
    deviation_after     double precision NOT NULL,
    volatility_after    double precision NOT NULL,
    PRIMARY KEY (match_id, player_id),
    UNIQUE (ruleset, player_id, game),
    FOREIGN KEY (match_id, seq) REFERENCES match_events (match_id, seq)
);

CREATE INDEX rating_changes_player_idx ON rating_changes (player_id, at DESC);

-- The history is audit data like the event log: never changed or removed.
CREATE FUNCTION rating_changes_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rating_changes is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER rating_changes_append_only
    BEFORE UPDATE OR DELETE ON rating_changes
    FOR EACH ROW EXECUTE FUNCTION rating_changes_refuse_change();

CREATE TRIGGER rating_changes_no_truncate
    BEFORE TRUNCATE ON rating_changes
    FOR EACH STATEMENT EXECUTE FUNCTION rating_changes_refuse_change();
