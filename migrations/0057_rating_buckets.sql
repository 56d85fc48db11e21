-- A rank is one plus the rated players above. Counted down `ratings_rank_idx` (migration
-- 0041) that cost as much as the rank: a player far down a ladder of 50,000 counted tens
-- of thousands of index entries. This table keeps, for each ladder, how many rated players
-- (`games > 0`) hold a rating in each bucket of 8 points (`bucket = floor(rating / 8)`),
-- written in the same transaction as every rating change (`store::ratings::record`). A
-- rank is then a sum over the bucket rows above the player's bucket (a few hundred at
-- most: ratings span a few thousand points) plus a count down `ratings_rank_idx` inside
-- the player's own bucket. Derived data: `statki verify` checks it against `ratings`.
-- (No CHECK on `players`: an upsert checks the row it proposes, a decrement, before it
-- meets the row it updates.)
CREATE TABLE rating_buckets (
    ruleset  text NOT NULL,
    bucket   integer NOT NULL,
    players  bigint NOT NULL,
    PRIMARY KEY (ruleset, bucket)
);

-- On Citus a copy on every node, like `ratings`.
DO $citus$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM create_reference_table('rating_buckets');
    END IF;
END;
$citus$;

-- The ladders as they stand.
INSERT INTO rating_buckets (ruleset, bucket, players)
SELECT ruleset, floor(rating / 8)::int, count(*) FROM ratings WHERE games > 0 GROUP BY 1, 2;

DO $grants$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'statki_auditor') THEN
        GRANT SELECT ON rating_buckets TO statki_auditor;
    END IF;
END;
$grants$;
