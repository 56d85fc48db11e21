-- The write path's guard. A batch of commands decided from a replica's kept match states
-- (without locking the rows first) is stored only if every row was still as it was decided
-- on. When one had moved on, the write statement calls this function, which fails the whole
-- statement with serialization_failure: nothing of the batch is stored, even when the
-- statement runs on its own outside an explicit transaction, and the replica decides the
-- batch again under row locks.
CREATE FUNCTION statki_rows_moved() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'a match row moved on after its command was decided'
        USING ERRCODE = 'serialization_failure';
END
$$;
