-- Citus's functions that run a caller's SQL on other nodes are revoked from PUBLIC: on a
-- worker that SQL reaches the shards by name, around the coordinator's grants and the
-- views that keep a running match's fleets and salts from `statki_auditor`
-- (docs/security.md, "Layouts"). The superuser keeps them. Run on every node, in every
-- database with the extension (`template1` too, so databases made from it inherit it):
-- `scripts/citus` and compose's `citus-init` do.
SET citus.enable_ddl_propagation = off;
REVOKE EXECUTE ON FUNCTION
    run_command_on_workers(text, boolean),
    run_command_on_all_nodes(text, boolean, boolean),
    run_command_on_coordinator(text, boolean),
    run_command_on_shards(regclass, text, boolean),
    run_command_on_placements(regclass, text, boolean),
    run_command_on_colocated_placements(regclass, regclass, text, boolean),
    master_run_on_worker(text[], integer[], text[], boolean)
FROM PUBLIC;
