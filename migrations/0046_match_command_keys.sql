-- Idempotency keys of commands on a match live with the match (docs/scaling.md): a keyed
-- command claims its key, changes the match and records its first answer on the match's
-- shard alone. A key is scoped by (match, player): a retry of a command is always sent to
-- the same match. `idempotency_keys` stays for requests without a match (registration,
-- the queue, a match's creation, sessions). The housekeeping step purges both after
-- `KEY_LIFETIME`.
CREATE TABLE match_command_keys (
    match_id      uuid NOT NULL,
    player_id     uuid NOT NULL,
    key           text NOT NULL,
    request_hash  text NOT NULL,
    response      jsonb,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (match_id, player_id, key)
);

CREATE INDEX match_command_keys_created_idx ON match_command_keys (created_at);

DO $citus$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM create_distributed_table('match_command_keys', 'match_id',
                                         colocate_with => 'matches');
    END IF;
END;
$citus$;
