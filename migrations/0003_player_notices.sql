-- A per-player feed of what concerns them outside any one match view: challenges,
-- opponents joining, queue pairings, rematch offers. Numbered per player so a reconnecting
-- stream resumes exactly where it left off.
CREATE TABLE player_notices (
    player_id   uuid NOT NULL REFERENCES players (id),
    seq         bigint NOT NULL CHECK (seq >= 1),
    at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind        text NOT NULL,
    payload     jsonb NOT NULL,
    PRIMARY KEY (player_id, seq)
);
