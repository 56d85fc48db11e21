-- Every command rewrites its match's snapshot (about 4 KB of JSON, stored compressed at
-- about 1.3 KB). LZ4 compresses it several times faster than the default pglz, for a few
-- percent more bytes. Rows written from now on use it; older values stay readable as
-- they are.
ALTER TABLE matches ALTER COLUMN snapshot SET COMPRESSION lz4;
