-- Accounts: an optional password for logging in again, and revocation of a player's tokens.

-- Password hashes live apart from `players`, so granting reads on players (as audits do)
-- never exposes them. `password_hash` is an Argon2id PHC string; the password itself is
-- never stored.
CREATE TABLE player_passwords (
    player_id      uuid PRIMARY KEY REFERENCES players (id),
    password_hash  text NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Tokens issued before this instant are refused (`DELETE /v1/me/tokens`); NULL until the
-- player first revokes. It only ever moves forward.
ALTER TABLE players ADD COLUMN tokens_valid_from timestamptz;

-- Registration has no player yet, so its idempotency keys are kept under the nil id: a key
-- space of their own, which no player can share.
ALTER TABLE players
    ADD CONSTRAINT players_id_not_nil CHECK (id <> '00000000-0000-0000-0000-000000000000');
