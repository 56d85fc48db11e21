-- Each player's latest notice number, one row per player. A notice takes its number with
-- `UPDATE ... RETURNING` on this row (an upsert for the first), which waits for a
-- concurrent taker and then reads its committed value: concurrent notices to one player
-- are numbered one after another. (Before, an advisory lock taken inside the `INSERT`
-- left the statement's snapshot older than the wait, so concurrent notices read the same
-- `max(seq)` and failed on the primary key.) Purging old notices never renumbers.
CREATE TABLE player_notice_heads (
    player_id  uuid PRIMARY KEY REFERENCES players (id) ON DELETE CASCADE,
    last_seq   bigint NOT NULL CHECK (last_seq >= 1)
);

INSERT INTO player_notice_heads (player_id, last_seq)
SELECT player_id, max(seq) FROM player_notices GROUP BY player_id;
