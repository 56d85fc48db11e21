-- Per-account password attempts, kept in the database so the back-off holds across
-- replicas and restarts. Keyed by the name's uniqueness key (`players.name_key`), so a
-- name with no account is backed off like one with an account and the answer tells
-- nothing. Log-ins and password changes both count here. A count untouched for a day
-- starts again from one; a right password deletes the row.
CREATE TABLE password_attempts (
    account       text PRIMARY KEY,
    failures      integer NOT NULL,
    locked_until  timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
