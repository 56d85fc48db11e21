-- A ladder page read its standings down `ratings_ladder_idx`, then each standing's heap
-- row and each player's name through `players_pkey`: four buffers a row, 267 for a page
-- of 51 among 100,000 players, twice the time of the same page on a small ladder. A
-- player's name never changes, so the standing keeps a copy of it, written with the
-- standing's first row (`store::ratings::lock`), and the page is one index-only scan of
-- `ratings_page_idx`, which holds every column the page shows. Derived data: `statki
-- verify` checks every copy against `players`.

-- Every change of the table's definition goes through EXECUTE: Citus sends DDL of a
-- reference table to the other nodes as the text of the query it came in, here the whole
-- migration, and a node refuses several commands in one.
DO $column$
BEGIN
    EXECUTE 'ALTER TABLE ratings ADD COLUMN name text';
END;
$column$;

UPDATE ratings r SET name = p.name FROM players p WHERE p.id = r.player_id;

DO $not_null$
BEGIN
    EXECUTE 'ALTER TABLE ratings ALTER COLUMN name SET NOT NULL';
END;
$not_null$;

-- Best first, ties by player id (the cursor's order), with what a page row shows.
DO $index$
BEGIN
    EXECUTE 'CREATE INDEX ratings_page_idx ON ratings (ruleset, rating DESC, player_id)
             INCLUDE (name, deviation, volatility, games, wins, losses, draws)
             WHERE games > 0';
END;
$index$;

-- The page was its only reader.
DO $drop$
BEGIN
    EXECUTE 'DROP INDEX ratings_ladder_idx';
END;
$drop$;
