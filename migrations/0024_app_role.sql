-- The service works as `statki_app`, a role that owns nothing: it reads and writes the
-- tables it needs, but may only insert and read the event log and the rating history, and
-- cannot alter a table, disable a trigger or change a grant. Migrations run as the owner
-- (the role of DATABASE_URL); the service then switches to `statki_app` on every pooled
-- connection (`SET ROLE`, see STATKI_DB_ROLE), so only an operator holding the owner's
-- credentials can rewrite history. Tables created by later migrations (run by the same
-- owner) are granted by the default privileges below; a later migration that wants a
-- table append-only revokes `UPDATE, DELETE` on it from `statki_app`. Like
-- `statki_auditor`, the role is cluster-wide and created once; an owner without the right
-- to create roles gets a notice, and the service then keeps working as the owner.
DO $$
BEGIN
    BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_app') THEN
            CREATE ROLE statki_app NOLOGIN;
        END IF;
    EXCEPTION
        WHEN duplicate_object OR unique_violation THEN NULL;
        WHEN insufficient_privilege THEN
            RAISE NOTICE 'statki_app not created: this role may not create roles';
            RETURN;
    END;
    BEGIN
        -- The owner may switch to it (a superuser always may).
        EXECUTE format('GRANT statki_app TO %I', current_user);
    EXCEPTION
        WHEN duplicate_object OR unique_violation OR invalid_grant_operation THEN NULL;
    END;
    GRANT USAGE ON SCHEMA public TO statki_app;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO statki_app;
    GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO statki_app;
    -- The record of play: appended and read, never changed.
    REVOKE UPDATE, DELETE, TRUNCATE ON match_events, rating_changes FROM statki_app;
    REVOKE ALL ON _sqlx_migrations FROM statki_app;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public
        GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO statki_app;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public
        GRANT USAGE, SELECT ON SEQUENCES TO statki_app;
    -- Row security (migration 0023) applies to this role: it sees and writes every row.
    CREATE POLICY service_all ON matches TO statki_app USING (true) WITH CHECK (true);
    CREATE POLICY service_all ON match_events TO statki_app USING (true) WITH CHECK (true);
END;
$$;
