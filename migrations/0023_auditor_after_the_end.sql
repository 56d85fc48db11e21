-- The auditor sees a match's hidden information only once the match is over. A running
-- match's row (its snapshot holds both fleets) and its events (placements, commitment
-- salts) are invisible to `statki_auditor` until the match is finished or cancelled, so
-- an operator auditing with that role cannot coach a player. Row security applies only to
-- roles that neither own the tables nor bypass it: the service (the owner, or
-- `statki_app`, which gets a policy of its own) and the audit views (run as their owner)
-- are unaffected. Operators who need a running match's state use the owner role.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
        CREATE POLICY auditor_after_the_end ON matches
            FOR SELECT TO statki_auditor
            USING (phase IN ('finished', 'cancelled'));
        CREATE POLICY auditor_after_the_end ON match_events
            FOR SELECT TO statki_auditor
            USING (EXISTS (SELECT FROM matches m
                           WHERE m.id = match_events.match_id
                             AND m.phase IN ('finished', 'cancelled')));
    END IF;
END;
$$;

ALTER TABLE matches ENABLE ROW LEVEL SECURITY;
ALTER TABLE match_events ENABLE ROW LEVEL SECURITY;
