-- The spectators' list of running matches, newest first, reads a page down this index
-- instead of sorting every match in play. Only a change of phase touches it (created_at
-- never changes), so writes within a phase stay heap-only updates.
CREATE INDEX matches_live_idx ON matches (created_at DESC, id DESC)
    WHERE phase IN ('placement', 'battle');
