-- The auditor reads the event log through the view `match_log`: the events of the matches
-- that are over (finished or cancelled), the same rule migration 0023 put in a row policy.
-- A policy that looks up the match row cannot be put on a Citus shard (migration 0030
-- dropped it there), and row security on the shards is checked as the role that runs the
-- query, even through a view of the owner; so on both backends the auditor has no direct
-- SELECT on `match_events` and reads it through the view, which joins the match row (the
-- auditor's policy on `matches`, `phase IN ('finished', 'cancelled')`, holds everywhere).
-- On Citus the auditor keeps SELECT on the shards (the revoke is made on the coordinator
-- only) with a policy letting every event row through there, since the coordinator, where
-- operators connect, refuses the table itself and the view applies the rule.
CREATE VIEW match_log AS
SELECT e.match_id, e.seq, e.at, e.actor, e.kind, e.payload
FROM match_events e
JOIN matches m ON m.id = e.match_id
WHERE m.phase IN ('finished', 'cancelled');

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
        RETURN;
    END IF;
    GRANT SELECT ON match_log TO statki_auditor;
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        CREATE POLICY auditor_through_views ON match_events
            FOR SELECT TO statki_auditor USING (true);
        SET LOCAL citus.enable_ddl_propagation = off;
        REVOKE SELECT ON match_events FROM statki_auditor;
    ELSE
        DROP POLICY auditor_after_the_end ON match_events;
        REVOKE SELECT ON match_events FROM statki_auditor;
    END IF;
END;
$$;
