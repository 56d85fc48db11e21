-- Deleting a player notifies the token channel (migration 0020) from the coordinator only.
-- On Citus `players` is a reference table: the delete runs on every node's copy, the
-- trigger fires on each, and a worker's copy is changed inside a two-phase commit, where
-- PostgreSQL refuses a NOTIFY ("cannot PREPARE a transaction that has executed LISTEN,
-- UNLISTEN, or NOTIFY"), so the delete failed. The coordinator holds a copy too (it is in
-- Citus's metadata, migration 0030) and changes it in the operator's own transaction: its
-- notify is the one the replicas, listening on the coordinator, receive. On plain
-- PostgreSQL the function notifies as before (the inner test is never planned there).
-- Citus propagates the new definition to the workers.
CREATE OR REPLACE FUNCTION statki_player_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        IF NOT citus_is_coordinator() THEN
            RETURN OLD;
        END IF;
    END IF;
    PERFORM pg_notify('statki_tokens', OLD.id::text);
    RETURN OLD;
END;
$$;
