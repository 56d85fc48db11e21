-- Stream tickets (POST /v1/stream-tickets): a short-lived, single-use stand-in for the
-- bearer token on the two stream endpoints, for a browser's EventSource, which cannot
-- send an Authorization header. Only a SHA-256 digest of each ticket is kept, so the table
-- never holds a usable ticket; redeeming deletes the row, so a ticket opens one stream at
-- most. `token_issued_micros` is the `iat` of the token the ticket was issued for: a
-- stream opened with the ticket ends when that token is revoked, as one opened with the
-- token would. Not readable by statki_auditor (a secret, like idempotency answers).
--
-- Each statement runs on its own (EXECUTE): on Citus (migration 0030) a table with a foreign
-- key to the reference table `players` becomes a Citus-managed local table, whose commands
-- Citus replays on the workers by their query string, which it cannot do with a string of
-- several statements, as a migration file is.
DO $$
BEGIN
    EXECUTE 'CREATE TABLE stream_tickets (
        digest              bytea PRIMARY KEY,
        player_id           uuid NOT NULL REFERENCES players (id) ON DELETE CASCADE,
        token_issued_micros bigint,
        expires_at          timestamptz NOT NULL
    )';
    EXECUTE 'CREATE INDEX stream_tickets_expiry_idx ON stream_tickets (expires_at)';
END;
$$;
