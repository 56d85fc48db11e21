-- Liveness of service replicas: each clock task stamps its row about once a second.
-- A replica starting after a gap with no stamp gives players back the outage time.
CREATE TABLE replicas (
    id          uuid PRIMARY KEY,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_seen   timestamptz NOT NULL
);
