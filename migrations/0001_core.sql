-- Statki core schema: players, matches (current state), the append-only event log,
-- idempotency records and service settings.

CREATE TABLE players (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    -- Names are unique regardless of case: "Ala" and "ALA" are the same captain.
    name_key    text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per match: its current state, kept in step with match_events by every command
-- in the same transaction. `snapshot` is the engine state; the other columns are copies
-- of it for indexes and plain-SQL audits.
CREATE TABLE matches (
    id          uuid PRIMARY KEY,
    ruleset     text NOT NULL,
    ranked      boolean NOT NULL,
    phase       text NOT NULL CHECK (phase IN ('waiting', 'placement', 'battle', 'finished', 'cancelled')),
    creator     uuid NOT NULL REFERENCES players (id),
    joiner      uuid REFERENCES players (id),
    invited     uuid REFERENCES players (id),
    turn        uuid,
    -- The next clock to run out; NULL once the match is over.
    deadline    timestamptz,
    winner      uuid,
    reason      text,
    last_seq    bigint NOT NULL,
    snapshot    jsonb NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE INDEX matches_deadline_idx ON matches (deadline) WHERE deadline IS NOT NULL;
CREATE INDEX matches_open_idx ON matches (created_at) WHERE phase = 'waiting';
CREATE INDEX matches_creator_idx ON matches (creator, created_at DESC);
CREATE INDEX matches_joiner_idx ON matches (joiner, created_at DESC);

-- The audit log: one row per event, never changed or removed.
CREATE TABLE match_events (
    match_id    uuid NOT NULL REFERENCES matches (id),
    seq         bigint NOT NULL CHECK (seq >= 1),
    at          timestamptz NOT NULL,
    -- The player whose action this records; NULL for clock and referee events.
    actor       uuid,
    kind        text NOT NULL,
    payload     jsonb NOT NULL,
    PRIMARY KEY (match_id, seq)
);

CREATE FUNCTION match_events_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'match_events is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER match_events_append_only
    BEFORE UPDATE OR DELETE ON match_events
    FOR EACH ROW EXECUTE FUNCTION match_events_refuse_change();

CREATE TRIGGER match_events_no_truncate
    BEFORE TRUNCATE ON match_events
    FOR EACH STATEMENT EXECUTE FUNCTION match_events_refuse_change();

-- A state-changing request's first answer, replayed for retries with the same key.
CREATE TABLE idempotency_keys (
    player_id     uuid NOT NULL,
    key           text NOT NULL,
    request_hash  text NOT NULL,
    response      jsonb,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (player_id, key)
);

CREATE TABLE settings (
    key    text PRIMARY KEY,
    value  text NOT NULL
);
