-- Shots become heap-only (HOT) updates.
--
-- Every shot moves its match's deadline. While `deadline` was indexed, no update of a
-- live match could be HOT: each one wrote a new entry into every index of `matches`. The
-- clock now finds due matches through `wake_at`, a lower bound of the deadline: a command
-- that moves the deadline later leaves it alone, one that moves it earlier lowers it, and
-- the clock raises it to the real deadline when it wakes for a match that is not due yet.
-- A shot then changes no indexed column, and its row update is HOT.
ALTER TABLE matches ADD COLUMN wake_at timestamptz;
UPDATE matches SET wake_at = deadline;
DROP INDEX matches_deadline_idx;
CREATE INDEX matches_wake_idx ON matches (wake_at) WHERE wake_at IS NOT NULL;

-- Room on every page for a row's next version, so a HOT update can stay on its page.
ALTER TABLE matches SET (fillfactor = 70);
