-- Hardening: an auditor role that cannot read secrets, and expiring idempotency keys.

-- `statki_auditor` reads the record of play and nothing secret. It has no login of its
-- own: an operator's own role is granted it (`GRANT statki_auditor TO alice`) and audits
-- with `SET ROLE statki_auditor`. Roles belong to the whole cluster, so several Statki
-- databases on one server share it, and concurrent first migrations may race to create
-- it. A database owner without the right to create roles (some managed services) gets a
-- notice instead; an administrator can then create the role and rerun these grants.
DO $$
BEGIN
    BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
            CREATE ROLE statki_auditor NOLOGIN;
        END IF;
    EXCEPTION
        WHEN duplicate_object OR unique_violation THEN NULL;
        WHEN insufficient_privilege THEN
            RAISE NOTICE 'statki_auditor not created: this role may not create roles';
            RETURN;
    END;
    GRANT USAGE ON SCHEMA public TO statki_auditor;
    -- The event log, the match rows, ratings and their history, and the audit views.
    GRANT SELECT ON match_events, matches, ratings, rating_changes, rematches
        TO statki_auditor;
    GRANT SELECT ON match_summary, shot_log, rating_history TO statki_auditor;
    -- Players column by column: a column added later (a password hash, say) stays
    -- unreadable unless a migration grants it on purpose.
    GRANT SELECT (id, name, created_at) ON players TO statki_auditor;
END;
$$;

-- Deliberately not granted: `settings` (the generated token secret), `idempotency_keys`
-- (stored answers carry tokens), `player_notices`, `queue_entries`, `rematch_offers`,
-- `replicas`, `stream_leases`. Tables created by later migrations are not readable unless
-- granted.

-- Idempotency keys expire (the service treats a key older than its lifetime as unused)
-- and a housekeeping step deletes them in batches, oldest first.
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- One row per open event stream, so the per-player stream cap holds across replicas.
-- Each replica renews its own leases; a lease its replica stopped renewing (it died) no
-- longer counts and is deleted by any replica.
CREATE TABLE stream_leases (
    id          uuid PRIMARY KEY,
    player_id   uuid NOT NULL,
    replica_id  uuid NOT NULL,
    renewed_at  timestamptz NOT NULL
);

CREATE INDEX stream_leases_player_idx ON stream_leases (player_id, renewed_at);
CREATE INDEX stream_leases_replica_idx ON stream_leases (replica_id);
